/** The main demo on the local environment (placeholder until later parts land; see runDemo). */
import type { Env } from '../../localenv/environment.ts';
export async function runDemo(_env: Env, say: (m: string) => void): Promise<void> { say('demo: TODO'); }
