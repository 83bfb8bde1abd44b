/**
 * The watch function the transport unit tests (transport.test.ts for the webhook transport,
 * lambda.test.ts for the lambda transport) send over the wire: it has the Run scheduler's shape.
 */
import { TerminalError, WaitingError } from '../lib/fn/errors.ts';
import { R } from '../lib/fn/resources.ts';
import type { ReconcileInput, WatchFunction } from '../lib/fn/types.ts';
import type { KubeObject } from '../lib/kube/types.ts';

/** Reads a Runtime by the key's name and lists the namespace's labelled Pods: the scheduler's shape. */
export const reader: WatchFunction = {
  name: 'reader',
  description: 'test',
  trigger: { type: 'watch', resource: R.runtimes },
  rbac: [],
  handler: ({ key, state, now }: ReconcileInput) => {
    const [ns, name] = key.split('/') as [string, string];
    const rt = state.get(R.runtimes, ns, name);
    const pods = state.list(R.pods, ns, { runtime: name });
    if (!rt) throw new WaitingError('NoRuntime', 'runtime missing', 1234);
    if (rt.metadata.labels?.bad) throw new TerminalError('Bad', 'bad runtime');
    return [
      {
        op: 'apply',
        resource: R.configMaps,
        object: {
          metadata: { name: `${name}-seen`, namespace: ns },
          data: { pods: pods.map((p) => p.metadata.name).join(','), at: now.toISOString() },
        },
      },
      { op: 'requeue', afterMs: 500 },
    ];
  },
};

export const obj = (name: string, ns: string, labels: Record<string, string> = {}): KubeObject => ({
  metadata: { name, namespace: ns, labels },
});
