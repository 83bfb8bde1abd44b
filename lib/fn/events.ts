/**
 * core/v1 Events as function operations. The name is derived from the involved object's UID,
 * the reason and a caller-chosen key for the occurrence, so a retried invocation recreates the
 * same name and the host treats AlreadyExists as done: one Event per occurrence, at least once,
 * without duplicates.
 */
import { createHash } from 'node:crypto';
import type { KubeObject } from '../kube/types.ts';
import { R } from './resources.ts';
import type { Operation } from './types.ts';

export interface EventSpec {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** Distinguishes one occurrence from another of the same reason. */ key: string;
}

export interface Involved {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid: string;
}

export function involvedOf(o: KubeObject, apiVersion: string, kind: string): Involved {
  return {
    apiVersion,
    kind,
    name: o.metadata.name ?? '',
    ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
    uid: o.metadata.uid ?? '',
  };
}

const hash = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 16);

/** The Event object (cluster-scoped objects report into "default"). */
export function eventObject(
  involved: Involved,
  e: EventSpec,
  now: Date,
  component: string,
): KubeObject & Record<string, unknown> {
  const namespace = involved.namespace ?? 'default';
  const at = now.toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${involved.name.slice(0, 200)}.${hash(`${involved.uid}|${e.reason}|${e.key}`)}`, namespace },
    involvedObject: involved,
    reason: e.reason,
    message: e.message.slice(0, 1024),
    type: e.type,
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
    source: { component },
  };
}

/** A create of a core/v1 Event about `involved`. */
export function eventOp(involved: Involved, e: EventSpec, now: Date, component: string): Operation {
  return { op: 'create', resource: R.events, object: eventObject(involved, e, now, component) };
}
