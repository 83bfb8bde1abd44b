/** The parts of a Run runtimed reads, as raw JSON. */
import type { KubeObject } from '../lib/kube/types.ts';
import type { RunStatus } from '../lib/run/phases.ts';
import type { RetryPolicy } from '../lib/run/retry.ts';
import type { Source } from './source.ts';

export interface RunSpec {
  runtime: string;
  source?: Source;
  mode?: {
    task?: { entrypoint?: string; args?: string[] };
    function?: { handler?: string; idleTimeoutSeconds?: number };
    session?: { command?: string[]; idleTimeoutSeconds?: number };
  };
  env?: { name: string; value?: string }[];
  timeout?: string;
  cancelRequested?: boolean;
  retryPolicy?: RetryPolicy;
  workspace?: { name: string };
  artifactInputs?: { path: string; artifactRef: Record<string, unknown> }[];
}

export interface Run extends KubeObject {
  spec: RunSpec;
  status?: RunStatus;
}
