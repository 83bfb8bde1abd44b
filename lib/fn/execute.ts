/** Applies a handler's operations with the API client: optimistic concurrency, idempotent creates. */
import { PatchType, type KubeClient } from '../kube/client.ts';
import { isApiError } from '../kube/errors.ts';
import type { KubeObject } from '../kube/types.ts';
import { apiVersionOf, resourcePath, type Operation, type Resource } from './types.ts';

/** An object a handler wrote, with the resourceVersion the API server answered. */
export interface Written { resource: Resource; object: KubeObject }
export interface ExecuteResult { requeueAfterMs?: number; written: Written[] }

export async function executeOperations(client: KubeClient, fieldManager: string, ops: Operation[]): Promise<ExecuteResult> {
  let requeueAfterMs: number | undefined;
  const written: Written[] = [];
  for (const op of ops) {
    if (op.op === 'requeue') { requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, op.afterMs); continue; }
    const obj = await executeOne(client, fieldManager, op);
    if (obj && op.op !== 'delete') written.push({ resource: op.resource, object: obj });
  }
  return requeueAfterMs === undefined ? { written } : { requeueAfterMs, written };
}

async function executeOne(client: KubeClient, fieldManager: string, op: Exclude<Operation, { op: 'requeue' }>): Promise<KubeObject | undefined> {
  switch (op.op) {
    case 'apply': {
      const m = op.object.metadata;
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object };
      return client.apply(resourcePath(op.resource, m.namespace, m.name, op.subresource), body, fieldManager);
    }
    case 'create': {
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object };
      try {
        return await client.create(resourcePath(op.resource, op.object.metadata.namespace), body, { fieldManager });
      } catch (err) {
        if (!isApiError(err, 409)) throw err;
        return undefined;
      }
    }
    case 'patch':
      return client.patch(resourcePath(op.resource, op.namespace, op.name, op.subresource), op.patch,
        op.patchType === 'json' ? PatchType.json : PatchType.merge, { fieldManager });
    case 'status': {
      const m = op.object.metadata;
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object };
      return client.replace(resourcePath(op.resource, m.namespace, m.name, 'status'), body);
    }
    case 'delete':
      try {
        await client.delete(resourcePath(op.resource, op.namespace, op.name), op.uid ? { preconditions: { uid: op.uid } } : undefined);
      } catch (err) {
        if (!isApiError(err, 404)) throw err;
      }
      return undefined;
  }
}
