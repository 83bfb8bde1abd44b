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

/**
 * Consecutive status writes (each touches a distinct object) and Event creates (fire-and-forget,
 * never read back by a handler) go out concurrently, at most this many at a time. A handler that
 * interleaves them (a Run's status, then its Event, as the scheduler does for each waiting Run)
 * would otherwise write one at a time: 300 waiting Runs took a scheduler invocation ~35 s.
 */
const PARALLEL_WRITES = 16;

type Applied = Exclude<Operation, { op: 'requeue' }>;

const parallelisable = (o: Operation): boolean =>
  o.op === 'status' || (o.op === 'create' && o.resource.resource === 'events' && o.resource.group === '');

/**
 * Splits ops into batches applied one after another; requeue ops are left out of the batches but
 * end the current one: a requeue between two writes is a barrier (the second is sent only after
 * the first succeeded, and not at all when it failed). devws-controller orders its Operation and
 * Workspace writes that way (steps.ts BARRIER: the Workspace write is the commit point).
 */
export function writeBatches(ops: Operation[], max = PARALLEL_WRITES): Applied[][] {
  const out: Applied[][] = [];
  let cur: Applied[] = [];
  const flush = (): void => {
    if (cur.length) out.push(cur);
    cur = [];
  };
  for (const op of ops) {
    if (op.op === 'requeue') {
      flush();
      continue;
    }
    if (!parallelisable(op)) {
      flush();
      out.push([op]);
      continue;
    }
    if (cur.length >= max) flush();
    cur.push(op);
  }
  flush();
  return out;
}

export async function executeOperations(
  client: KubeClient,
  fieldManager: string,
  ops: Operation[],
): Promise<ExecuteResult> {
  let requeueAfterMs: number | undefined;
  for (const op of ops) if (op.op === 'requeue') requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, op.afterMs);
  const written: Written[] = [];
  for (const batch of writeBatches(ops)) {
    const results = await Promise.allSettled(batch.map((b) => executeOne(client, fieldManager, b)));
    for (const [k, r] of results.entries()) {
      if (r.status === 'rejected') throw r.reason;
      const b = batch[k]!;
      if (r.value && 'resource' in b && b.op !== 'delete') written.push({ resource: b.resource, object: r.value });
    }
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
