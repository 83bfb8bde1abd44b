/** Chooses how runtimed finishes Runs: outputs only, or outputs + artifacts when the Runtime has a store. */
import type { RuntimedConfig } from './config.ts';
import { OutputsFinisher, type Finisher } from './finish.ts';

export function makeFinisher(cfg: RuntimedConfig): Finisher {
  if (cfg.artifactStore) throw new Error('runtimed: artifact stores are being integrated; this build supports Runtimes without spec.artifactStore');
  return new OutputsFinisher(cfg.workspaceRoot);
}
