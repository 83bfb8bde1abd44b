/** Applies a handler's operations with the API client: optimistic concurrency, idempotent creates. */
import { PatchType, type KubeClient } from '../kube/client.ts';
import { isApiError } from '../kube/errors.ts';
import { apiVersionOf, resourcePath, type Operation } from './types.ts';

export interface ExecuteResult { requeueAfterMs?: number }

export async function executeOperations(client: KubeClient, fieldManager: string, ops: Operation[]): Promise<ExecuteResult> {
  let requeueAfterMs: number | undefined;
  for (const op of ops) {
    if (op.op === 'requeue') { requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, op.afterMs); continue; }
    await executeOne(client, fieldManager, op);
  }
  return requeueAfterMs === undefined ? {} : { requeueAfterMs };
}

async function executeOne(client: KubeClient, fieldManager: string, op: Exclude<Operation, { op: 'requeue' }>): Promise<void> {
  switch (op.op) {
    case 'apply': {
      const m = op.object.metadata;
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object };
      await client.apply(resourcePath(op.resource, m.namespace, m.name, op.subresource), body, fieldManager);
      return;
    }
    case 'create': {
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object };
      try {
        await client.create(resourcePath(op.resource, op.object.metadata.namespace), body, { fieldManager });
      } catch (err) {
        if (!isApiError(err, 409)) throw err;
      }
      return;
    }
    case 'patch':
      await client.patch(resourcePath(op.resource, op.namespace, op.name, op.subresource), op.patch,
        op.patchType === 'json' ? PatchType.json : PatchType.merge, { fieldManager });
      return;
    case 'status': {
      const m = op.object.metadata;
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object };
      await client.replace(resourcePath(op.resource, m.namespace, m.name, 'status'), body);
      return;
    }
    case 'delete':
      try {
        await client.delete(resourcePath(op.resource, op.namespace, op.name), op.uid ? { preconditions: { uid: op.uid } } : undefined);
      } catch (err) {
        if (!isApiError(err, 404)) throw err;
      }
  }
}
