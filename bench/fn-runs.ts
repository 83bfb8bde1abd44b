/**
 * The function benches' cluster set-up (bench/functions.ts, bench/functions-cpu.ts): a Runtime per
 * measured function, its echo function Run, the caller's token, and the wait until every Run is
 * Ready. One echo handler per language, the same in every bench.
 */
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { callerToken } from './fn-caller.ts';

export type Lang = 'bash' | 'python';
export type Run = KubeObject & { status?: { phase?: string } };

const IMAGES: Record<Lang, string> = {
  bash: 'ghcr.io/kruntimes/bash-runtime:v0.0.3',
  python: 'ghcr.io/kruntimes/python-runtime:v0.0.3',
};
/** The trivial handler of each language: its output is its payload. */
const FUNCTIONS: Record<Lang, { handler: string; source: { inlinePath: string; inline: string } }> = {
  bash: { handler: 'echo.echo', source: { inlinePath: 'echo.sh', inline: 'echo() { printf "%s" "$1"; }\n' } },
  python: { handler: 'fns.echo.echo', source: { inlinePath: 'fns/echo.py', inline: 'def echo(p):\n    return p\n' } },
};

/** A measured function: its Runtime's name (the Run is `fn-<name>`), language, and container env. */
export interface BenchFunction {
  name: string;
  lang: Lang;
  env?: { name: string; value: string }[];
}

/** Resolves with f's first defined value, trying again every `everyMs` (errors count as undefined). */
export async function until<T>(f: () => Promise<T | undefined>, everyMs = 20): Promise<T> {
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Pure: the one-Pod Runtime of a measured function (its language's image, the env given). */
export function runtimeOf(fn: BenchFunction): object {
  const container = {
    name: 'runtime',
    image: IMAGES[fn.lang],
    args: ['--port=9091', '--work-dir=/workspace'],
    ...(fn.env ? { env: fn.env } : {}),
  };
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Runtime',
    metadata: { name: fn.name },
    spec: { replicas: 1, capacity: { resources: { runs: '4' } }, template: { spec: { containers: [container] } } },
  };
}

/** Namespace `ns`, a Runtime and a function Run per entry of `fns`, all Ready; resolves with a caller token. */
export async function functionRuns(api: KubeClient, ns: string, fns: BenchFunction[]): Promise<string> {
  const g = `/apis/kruntimes.io/v1alpha1/namespaces/${ns}`;
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  for (const fn of fns) {
    const f = FUNCTIONS[fn.lang];
    await api.create(`${g}/runtimes`, runtimeOf(fn));
    await api.create(`${g}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: `fn-${fn.name}` },
      spec: { runtime: fn.name, mode: { function: { handler: f.handler } }, source: f.source },
    });
  }
  const token = await callerToken(api, ns);
  for (const fn of fns)
    await until(async () =>
      (await api.get<Run>(`${g}/runs/fn-${fn.name}`)).status?.phase === 'Ready' ? true : undefined,
    );
  return token;
}
