/**
 * Sample watch function: every ConfigMap labelled kruntimes.io/sample=echo gets a reply
 * ConfigMap "<name>-echo" holding the same data, owned by the source (deleted with it).
 * It shows the contract: observed state in, declarative operations out, nothing else.
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';

export const ECHO_LABEL = 'kruntimes.io/sample';

export function reconcileEcho({ object }: ReconcileInput): Operation[] {
  if (!object || object.metadata.deletionTimestamp) return [];
  const m = object.metadata;
  return [
    {
      op: 'apply',
      resource: R.configMaps,
      object: {
        metadata: {
          name: `${m.name}-echo`,
          namespace: m.namespace,
          labels: { [ECHO_LABEL]: 'echo-reply' },
          ownerReferences: [
            {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              name: m.name ?? '',
              uid: m.uid ?? '',
              controller: true,
              blockOwnerDeletion: false,
            },
          ],
        },
        data: { ...((object as { data?: Record<string, string> }).data ?? {}) },
      },
    },
  ];
}

const fn: FunctionDef = {
  name: 'sample-echo',
  description: 'Sample: mirrors ConfigMaps labelled kruntimes.io/sample=echo into <name>-echo.',
  trigger: {
    type: 'watch',
    resource: R.configMaps,
    labelSelector: `${ECHO_LABEL}=echo`,
    filter: (e) => e.type !== 'deleted',
  },
  concurrency: 4,
  rbac: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'update'] }],
  handler: reconcileEcho,
};
export default fn;
