/**
 * Function-mode Runs on this Runtime Pod (issue 15): stage the source, register the handler with
 * the Runtime Server (attempts counted in status.attempt, retried per the retry policy), go Ready
 * with status.endpoint, serve calls from the Runtime Gateway one at a time, and end on cancel
 * (drain, then cancel the in-flight call), spec.timeout (Timeout) or idle timeout (Timeout,
 * IdleTimeout). A call's error never changes the Run's phase. The finalizer
 * kruntimes.io/function-cleanup keeps the Run until its handler is unregistered.
 */
import { isApiError } from '../lib/kube/errors.ts';
import { formatDuration, parseDuration } from '../lib/run/duration.ts';
import {
  claimed,
  functionEnded,
  functionReady,
  retryScheduled,
  retryStarted,
  type FunctionEndpoint,
  type RunStatus,
} from '../lib/run/phases.ts';
import { backoffMs, currentAttempt, shouldRetry } from '../lib/run/retry.ts';
import { isUnsafePathError } from './artifacts/safe-dir.ts';
import { FunctionRegistrationError } from './runtime-client.ts';
import type { InvokeResult } from './runtime-server/functions.ts';
import { PrepareError } from './source.ts';
import type { Run } from './types.ts';

export const FUNCTION_FINALIZER = 'kruntimes.io/function-cleanup';
/** Default spec.mode.function.idleTimeoutSeconds (as for sessions). */
export const FUNCTION_IDLE_SECONDS = 600;
/** How long an ending function waits for its in-flight call before cancelling it. */
export const FUNCTION_DRAIN_MS = 5000;

export interface FunctionState {
  ready: boolean;
  ended: boolean;
  busy: boolean;
  idle?: NodeJS.Timeout;
  deadline?: NodeJS.Timeout;
  /** Resolves the drain wait when the in-flight call ends. */
  drained?: () => void;
}

/** What the lifecycle needs of an Active Run of the Runner. */
export interface FunctionActive {
  run: Run;
  attempt: number;
  startedAt: string;
  cancelling: boolean;
  lost?: boolean;
  workdir: string;
  fn?: FunctionState;
}

/** The Runner's side of the lifecycle (runner.ts). */
export interface FunctionHost {
  readonly d: import('./runner.ts').RunnerDeps;
  writeStatus(a: FunctionActive, build: (s: RunStatus) => RunStatus): Promise<Run | undefined>;
  started(a: FunctionActive, s: RunStatus): RunStatus;
  /** Stages source and artifact inputs; returns the working directory of the handler. */
  stageFunction(run: Run): Promise<string>;
  release(a: FunctionActive): Promise<void>;
  event(run: Run, type: 'Normal' | 'Warning', reason: string, message: string, key: string): void;
  /** The endpoint of this Pod's Runtime Gateway for the Run (undefined: no gateway). */
  endpointFor(run: Run): FunctionEndpoint | undefined;
  /** Logs a failure of work started from a timer (never an unhandled rejection). */
  background(run: Run, work: Promise<unknown>): void;
}

/** The gateway's view of a call target: ready to call, or the HTTP code and why not. */
export type CallTarget =
  | { code: 200; run: Run; call: (payload: string) => Promise<InvokeResult> }
  | { code: 404 | 429 | 503; message: string };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const runPath = (run: Run): string =>
  `/apis/kruntimes.io/v1alpha1/namespaces/${run.metadata.namespace}/runs/${run.metadata.name}`;

/** Why a registration attempt failed: a stable reason, and whether the retry policy applies. */
export function registrationFailure(err: unknown): { reason: string; message: string; retryable: boolean } {
  const message = err instanceof Error ? err.message : String(err);
  if (isUnsafePathError(err)) return { reason: err.reason, message, retryable: false };
  if (err instanceof PrepareError) return { reason: 'PrepareSource', message, retryable: true };
  if (err instanceof FunctionRegistrationError) return { reason: 'FunctionRegistration', message, retryable: true };
  const reason = (err as { reason?: unknown }).reason;
  if (typeof reason === 'string') return { reason, message, retryable: false };
  return { reason: 'FunctionRegistration', message: `runtime server: ${message}`, retryable: true };
}

/** Pure: the code a call gets from the state of the function Run named in its URL. */
export function callDecision(
  fn: { uid: string; ready: boolean; ended: boolean; busy: boolean } | undefined,
  name: string,
  uid: string,
): { code: 200 } | { code: 404 | 429 | 503; message: string } {
  if (!fn) return { code: 404, message: `no function Run ${name} is served by this Runtime Pod` };
  if (fn.uid !== uid)
    return {
      code: 404,
      message: `Run ${name} has another UID (${fn.uid}): the Run was recreated; use its new endpoint`,
    };
  if (fn.ended) return { code: 503, message: `function Run ${name} is ending` };
  if (!fn.ready) return { code: 503, message: `function Run ${name} is not ready yet` };
  if (fn.busy)
    return { code: 429, message: `function Run ${name} already has a call in flight (one at a time, no queue)` };
  return { code: 200 };
}

export class FunctionRuns {
  constructor(private readonly h: FunctionHost) {}

  private get d(): FunctionHost['d'] {
    return this.h.d;
  }

  /** A function Run taken up by this runtimed (Scheduled, Running, or Ready after a restart). */
  async start(a: FunctionActive): Promise<void> {
    a.fn = { ready: false, ended: false, busy: false };
    if (!(await this.addFinalizer(a.run))) {
      await this.h.release(a);
      return;
    }
    this.armDeadline(a);
    if (a.run.spec.cancelRequested) {
      await this.end(a, 'Cancelled', 'cancelled by user');
      return;
    }
    if (a.run.status?.phase === 'Scheduled') {
      const now = this.d.now().toISOString();
      const res = await this.h.writeStatus(a, (s) =>
        claimed({ ...s, startTime: s.startTime ?? a.startedAt }, now, a.run.metadata.generation),
      );
      if (!res) {
        await this.abandon(a);
        return;
      }
    }
    await this.registerLoop(a);
  }

  /** Registration attempts until Ready, the retry policy gives up (terminal), or the function ends. */
  private async registerLoop(a: FunctionActive): Promise<void> {
    for (;;) {
      if (!a.fn || a.fn.ended || a.lost) return;
      try {
        await this.register(a);
        break;
      } catch (err) {
        const f = registrationFailure(err);
        if (!(await this.retry(a, f))) return;
      }
    }
    await this.becomeReady(a);
  }

  private async register(a: FunctionActive): Promise<void> {
    const handler = a.run.spec.mode?.function?.handler;
    if (!handler)
      throw Object.assign(new Error('spec.mode.function.handler is required'), { reason: 'FunctionRegistration' });
    a.workdir = await this.h.stageFunction(a.run);
    const env = Object.fromEntries((a.run.spec.env ?? []).map((e) => [e.name, e.value ?? '']));
    await this.d.runtime.registerFunction({ id: a.run.metadata.uid ?? '', handler, workingDir: a.workdir, env });
  }

  /** A failed registration: the next attempt after the policy's backoff (true), or the terminal phase (false). */
  private async retry(a: FunctionActive, f: { reason: string; message: string; retryable: boolean }): Promise<boolean> {
    if (!f.retryable || !shouldRetry(a.run.spec.retryPolicy, a.attempt, f.reason)) {
      await this.end(a, f.reason, f.message);
      return false;
    }
    const now = this.d.now().toISOString();
    const written = await this.h.writeStatus(a, (s) => retryScheduled(s, now, f.reason, f.message));
    if (!written) {
      await this.abandon(a);
      return false;
    }
    this.h.event(
      a.run,
      'Warning',
      f.reason,
      `registration attempt ${a.attempt} failed: ${f.message}; retrying`,
      `attempt-${a.attempt}`,
    );
    a.attempt = currentAttempt(written.status?.attempt);
    await sleep(backoffMs(a.run.spec.retryPolicy, a.attempt));
    if (!a.fn || a.fn.ended) return false;
    return !!(await this.h.writeStatus(a, (s) => retryStarted(s, this.d.now().toISOString())));
  }

  private async becomeReady(a: FunctionActive): Promise<void> {
    const fn = a.fn;
    const endpoint = this.h.endpointFor(a.run);
    if (!fn || fn.ended) {
      // Ended (cancel, timeout, taken away) while the registration was in flight: it may have
      // registered after the end's unregister, so unregister again.
      await this.d.runtime.unregisterFunction(a.run.metadata.uid ?? '').catch(() => undefined);
      return;
    }
    if (!endpoint) {
      await this.end(a, 'FunctionRegistration', 'this Runtime Pod has no Runtime Gateway');
      return;
    }
    const now = this.d.now().toISOString();
    const gen = a.run.metadata.generation;
    if (!(await this.h.writeStatus(a, (s) => functionReady(this.h.started(a, s), now, endpoint, gen)))) {
      await this.abandon(a);
      return;
    }
    fn.ready = true;
    this.h.event(
      a.run,
      'Normal',
      'FunctionRegistered',
      `function is ready on Runtime Pod ${this.d.cfg.podName}`,
      'ready',
    );
    this.armIdle(a);
  }

  private armDeadline(a: FunctionActive): void {
    const timeoutMs = parseDuration(a.run.spec.timeout);
    const start = Date.parse(a.run.status?.startTime ?? a.startedAt);
    if (!timeoutMs || !Number.isFinite(start) || !a.fn) return;
    a.fn.deadline = setTimeout(
      () => this.h.background(a.run, this.end(a, 'Timeout', `timeout after ${formatDuration(timeoutMs)}`)),
      Math.max(0, start + timeoutMs - this.d.now().getTime()),
    );
  }

  private armIdle(a: FunctionActive): void {
    const fn = a.fn;
    if (!fn || fn.ended || !fn.ready) return;
    clearTimeout(fn.idle);
    if (fn.busy) return;
    const secs = a.run.spec.mode?.function?.idleTimeoutSeconds ?? FUNCTION_IDLE_SECONDS;
    fn.idle = setTimeout(
      () => this.h.background(a.run, this.end(a, 'IdleTimeout', `function ended after ${secs}s without a call`)),
      secs * 1000,
    );
  }

  /** The gateway's call target for a Run of this Pod (404 unknown or other UID, 503 not ready, 429 busy). */
  target(a: FunctionActive | undefined, name: string, uid: string): CallTarget {
    const fn = a?.fn;
    const view = a && fn ? { uid: a.run.metadata.uid ?? '', ...fn } : undefined;
    const decision = callDecision(view, name, uid);
    if (decision.code !== 200 || !a || !fn) return decision as CallTarget;
    fn.busy = true;
    clearTimeout(fn.idle);
    return { code: 200, run: a.run, call: (payload) => this.call(a, fn, payload) };
  }

  private async call(a: FunctionActive, fn: FunctionState, payload: string): Promise<InvokeResult> {
    let result: InvokeResult | undefined;
    try {
      result = await this.d.runtime.invokeFunction(a.run.metadata.uid ?? '', payload);
      return result;
    } finally {
      fn.busy = false;
      fn.drained?.();
      if (result?.ok === false && result.reason === 'NotRegistered' && fn.ready && !fn.ended)
        this.h.background(a.run, this.registrationLost(a, result.error));
      else this.armIdle(a);
    }
  }

  /**
   * The Runtime Server answered a call of a Ready function with NotRegistered: it no longer has the
   * handler (its execution lease lapsed and it dropped its functions, or it restarted). The Run is
   * not Ready any more; the loss is a failed attempt under the retry policy: register again, or end
   * Failed with reason FunctionLost (never Ready with every call refused until the idle timeout).
   */
  private async registrationLost(a: FunctionActive, why: string): Promise<void> {
    const fn = a.fn;
    if (!fn || fn.ended || !fn.ready) return;
    fn.ready = false;
    clearTimeout(fn.idle);
    const message = `the Runtime Server no longer has the handler registered (${why})`;
    if (await this.retry(a, { reason: 'FunctionLost', message, retryable: true })) await this.registerLoop(a);
  }

  /** Ends the function: stop taking calls, drain the in-flight call (bounded), cancel it, unregister, terminal status. */
  async end(a: FunctionActive, reason: string, message: string): Promise<void> {
    const fn = a.fn;
    if (!fn || fn.ended) return;
    fn.ended = true;
    a.cancelling = reason === 'Cancelled';
    clearTimeout(fn.idle);
    clearTimeout(fn.deadline);
    await this.drain(a, fn);
    const now = this.d.now().toISOString();
    this.h.event(a.run, reason === 'Cancelled' ? 'Normal' : 'Warning', reason, message, 'terminal');
    await this.h.writeStatus(a, (s) => functionEnded(this.h.started(a, s), now, reason, message));
    await this.removeFinalizer(a.run);
    await this.h.release(a);
  }

  private async drain(a: FunctionActive, fn: FunctionState): Promise<void> {
    const uid = a.run.metadata.uid ?? '';
    if (fn.busy) {
      await Promise.race([
        new Promise<void>((r) => {
          fn.drained = r;
        }),
        sleep(FUNCTION_DRAIN_MS),
      ]);
      if (fn.busy) await this.d.runtime.cancelFunctionCall(uid).catch(() => undefined);
    }
    await this.d.runtime.unregisterFunction(uid).catch(() => undefined);
  }

  /** Taken away (rescheduled) or deleted: unregister without a status write; the finalizer stays for the new owner. */
  async abandon(a: FunctionActive): Promise<void> {
    if (a.fn) {
      a.fn.ended = true;
      clearTimeout(a.fn.idle);
      clearTimeout(a.fn.deadline);
    }
    await this.d.runtime.unregisterFunction(a.run.metadata.uid ?? '').catch(() => undefined);
    await this.h.release(a);
  }

  /** The Run is being deleted: unregister, then let it go. */
  async deleted(a: FunctionActive | undefined, run: Run): Promise<void> {
    if (a) await this.abandon(a);
    else await this.d.runtime.unregisterFunction(run.metadata.uid ?? '').catch(() => undefined);
    await this.removeFinalizer(run);
  }

  private async addFinalizer(run: Run): Promise<boolean> {
    return this.patchFinalizers(run, (list) =>
      list.includes(FUNCTION_FINALIZER) ? undefined : [...list, FUNCTION_FINALIZER],
    );
  }

  async removeFinalizer(run: Run): Promise<boolean> {
    return this.patchFinalizers(run, (list) =>
      list.includes(FUNCTION_FINALIZER) ? list.filter((f) => f !== FUNCTION_FINALIZER) : undefined,
    );
  }

  /** Read-modify-write of metadata.finalizers guarded by resourceVersion; false when the Run is gone. */
  private async patchFinalizers(run: Run, change: (list: string[]) => string[] | undefined): Promise<boolean> {
    for (let i = 0; i < 5; i++) {
      try {
        const fresh = await this.d.client.get<Run>(runPath(run));
        if (fresh.metadata.uid !== run.metadata.uid) return false;
        const next = change(fresh.metadata.finalizers ?? []);
        if (!next) return true;
        await this.d.client.patch(runPath(run), {
          metadata: { resourceVersion: fresh.metadata.resourceVersion, finalizers: next },
        });
        return true;
      } catch (err) {
        if (isApiError(err, 404)) return false;
        if (!isApiError(err, 409)) throw err;
      }
    }
    throw new Error(`finalizers of Run ${run.metadata.name}: too many conflicts`);
  }
}
