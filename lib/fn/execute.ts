/** Applies a handler's operations with the API client: optimistic concurrency, idempotent creates. */
import { PatchType, type KubeClient } from '../kube/client.ts';
import { isApiError } from '../kube/errors.ts';
import { deleteRunArtifacts } from './artifacts.ts';
import type { KubeObject } from '../kube/types.ts';
import { apiVersionOf, resourcePath, type Operation, type Resource } from './types.ts';

/** An object a handler wrote, with the resourceVersion the API server answered. */
export interface Written {
  resource: Resource;
  object: KubeObject;
}
export interface ExecuteResult {
  requeueAfterMs?: number;
  written: Written[];
}

/** Consecutive status writes touch distinct objects, so they go out concurrently (bounded). */
const PARALLEL_STATUS = 16;

export async function executeOperations(
  client: KubeClient,
  fieldManager: string,
  ops: Operation[],
): Promise<ExecuteResult> {
  let requeueAfterMs: number | undefined;
  const written: Written[] = [];
  for (let i = 0; i < ops.length;) {
    const op = ops[i]!;
    if (op.op === 'requeue') {
      requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, op.afterMs);
      i++;
      continue;
    }
    let j = i + 1;
    if (op.op === 'status') while (j < ops.length && j - i < PARALLEL_STATUS && ops[j]!.op === 'status') j++;
    const batch = ops.slice(i, j) as Exclude<Operation, { op: 'requeue' }>[];
    const results = await Promise.allSettled(batch.map((b) => executeOne(client, fieldManager, b)));
    for (const [k, r] of results.entries()) {
      if (r.status === 'rejected') throw r.reason;
      const b = batch[k]!;
      if (r.value && 'resource' in b && b.op !== 'delete') written.push({ resource: b.resource, object: r.value });
    }
    i = j;
  }
  return requeueAfterMs === undefined ? { written } : { requeueAfterMs, written };
}

async function executeOne(
  client: KubeClient,
  fieldManager: string,
  op: Exclude<Operation, { op: 'requeue' }>,
): Promise<KubeObject | undefined> {
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
      return client.patch(
        resourcePath(op.resource, op.namespace, op.name, op.subresource),
        op.patch,
        op.patchType === 'json' ? PatchType.json : PatchType.merge,
        { fieldManager },
      );
    case 'status': {
      // The observed object's managedFields are the API server's to keep; sending them back would
      // ask it to replace them.
      const { managedFields: _mf, ...m } = op.object.metadata as KubeObject['metadata'] & { managedFields?: unknown };
      const body = { apiVersion: apiVersionOf(op.resource), kind: op.resource.kind, ...op.object, metadata: m };
      return client.replace(resourcePath(op.resource, m.namespace, m.name, 'status'), body);
    }
    case 'deleteRunArtifacts':
      await deleteRunArtifacts(client, op);
      return undefined;
    case 'delete':
      try {
        await client.delete(
          resourcePath(op.resource, op.namespace, op.name),
          op.uid ? { preconditions: { uid: op.uid } } : undefined,
        );
      } catch (err) {
        if (!isApiError(err, 404)) throw err;
      }
      return undefined;
  }
}
