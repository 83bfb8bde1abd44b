/**
 * External effects (seed 002 "effect：外部副作用的持久意图"): every substrate action is planned
 * first; the effect's ID is the external idempotency key (a sandbox_ensure ID is also the sandbox
 * instance ID). Results are immutable (409 external_state_conflict, external_binding_conflict); a
 * timeout never means "not executed"; after the lease changes hands, effects of an older epoch
 * must be re-observed by ID before anything advances (409 reconcile_required).
 */
import { createHash } from 'node:crypto';
import { DevwsError, type Effect, type EffectKind, type OperationStatus } from './api.ts';

const SHORT: Record<EffectKind, string> = {
  sandbox_ensure: 'sbx',
  sandbox_terminate: 'term',
  workspace_data_delete: 'ddel',
};

/** The deterministic ID of an effect: a DNS label, stable across retries and controller restarts. */
export function effectId(operationUid: string, kind: EffectKind, workspace: string, generation: number): string {
  const h = createHash('sha256').update(`${operationUid}\0${kind}\0${workspace}\0${generation}`).digest('hex');
  return `ws-${SHORT[kind]}-${h.slice(0, 20)}`;
}

export function findEffect(s: OperationStatus, id: string): Effect | undefined {
  return (s.effects ?? []).find((e) => e.id === id);
}

/** Plans an effect (idempotent: an existing plan is kept unchanged). Refused while reconciliation is due. */
export function planEffect(s: OperationStatus, e: Omit<Effect, 'leaseEpoch'>, leaseEpoch: number): OperationStatus {
  assertReconciled(s, leaseEpoch);
  if (findEffect(s, e.id)) return s;
  return { ...s, effects: [...(s.effects ?? []), { ...e, leaseEpoch }] };
}

export interface EffectObservation {
  externalId: string;
  outcome: 'succeeded' | 'failed';
  nodeId?: string;
  terminated?: boolean;
  removed?: boolean;
}

function sameResult(e: Effect, o: EffectObservation): boolean {
  return e.outcome === o.outcome && e.nodeId === o.nodeId && e.terminated === o.terminated && e.removed === o.removed;
}

/**
 * Records an observed result. The external ID never changes once recorded
 * (external_binding_conflict); a succeeded result is never overwritten by a different one
 * (external_state_conflict). Recording the same result again is a no-op. The effect is stamped
 * with the epoch of the controller that observed it.
 */
export function recordEffect(
  s: OperationStatus,
  id: string,
  o: EffectObservation,
  leaseEpoch: number,
): OperationStatus {
  const e = findEffect(s, id);
  if (!e) throw new DevwsError('effect_not_planned', 409, `effect ${id} was not planned`);
  if (e.externalId && e.externalId !== o.externalId) {
    throw new DevwsError(
      'external_binding_conflict',
      409,
      `effect ${id} is bound to ${e.externalId}, not ${o.externalId}`,
    );
  }
  if (e.outcome === 'succeeded' && !sameResult(e, o)) {
    throw new DevwsError('external_state_conflict', 409, `effect ${id} already succeeded with another result`);
  }
  const next: Effect = { ...e, ...o, leaseEpoch: Math.max(e.leaseEpoch, leaseEpoch) };
  return { ...s, effects: (s.effects ?? []).map((x) => (x.id === id ? next : x)) };
}

/**
 * Re-observation of an effect by ID after a lease change when the substrate has no object with
 * that ID: the effect is stamped with the new epoch and keeps no outcome (it may be executed
 * again with the same idempotency key). A recorded outcome is never erased.
 */
export function reconcileAbsent(s: OperationStatus, id: string, leaseEpoch: number): OperationStatus {
  const e = findEffect(s, id);
  if (!e) throw new DevwsError('effect_not_planned', 409, `effect ${id} was not planned`);
  const next: Effect = { ...e, leaseEpoch: Math.max(e.leaseEpoch, leaseEpoch) };
  return { ...s, effects: (s.effects ?? []).map((x) => (x.id === id ? next : x)) };
}

/**
 * A new intent to send the create of an effect (substrates without an idempotency key): only for
 * an effect whose outcome is not recorded; the step decides when (never right after a timeout).
 */
export function markSent(s: OperationStatus, id: string, now: Date): OperationStatus {
  const e = findEffect(s, id);
  if (!e) throw new DevwsError('effect_not_planned', 409, `effect ${id} was not planned`);
  if (e.outcome) throw new DevwsError('external_state_conflict', 409, `effect ${id} already has an outcome`);
  const next: Effect = { ...e, sentAt: now.toISOString() };
  return { ...s, effects: (s.effects ?? []).map((x) => (x.id === id ? next : x)) };
}

/** Effects planned or observed under an older lease epoch: they must be re-observed by ID first. */
export function effectsToReconcile(s: OperationStatus, leaseEpoch: number): Effect[] {
  return (s.effects ?? []).filter((e) => e.leaseEpoch < leaseEpoch);
}

export function assertReconciled(s: OperationStatus, leaseEpoch: number): void {
  const stale = effectsToReconcile(s, leaseEpoch);
  if (stale.length > 0) {
    throw new DevwsError(
      'reconcile_required',
      409,
      `effects ${stale.map((e) => e.id).join(', ')} were last reconciled under an older lease epoch`,
    );
  }
}

/** A failed or timed-out substrate call: the plan, its external reference and the step are kept. */
export function deferAfterCallError(s: OperationStatus, reason: string, now: Date, delayMs: number): OperationStatus {
  return { ...s, state: 'retry_wait', reason, retryAt: new Date(now.getTime() + delayMs).toISOString() };
}
