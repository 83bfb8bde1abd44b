/**
 * The Run state machine of runtimed: claim, stage, execute on the Runtime Server, follow
 * output into Run-keyed log records, then outputs, artifacts and the terminal status; with
 * cancellation, deadline, in-place retries and recovery of executions after a restart.
 * Status writes carry the observed resourceVersion (optimistic concurrency).
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { eventObject, involvedOf, type EventSpec } from '../lib/fn/events.ts';
import { formatDuration, parseDuration } from '../lib/run/duration.ts';
import {
  claimed,
  isTerminal,
  retryScheduled,
  retryStarted,
  sessionEnded,
  sessionReady,
  succeeded,
  terminalFailure,
  type RunStatus,
} from '../lib/run/phases.ts';
import { backoffMs, currentAttempt, shouldRetry } from '../lib/run/retry.ts';
import type { RuntimedConfig } from './config.ts';
import { endRecord, logRecord } from './logs.ts';
import type { Following, RuntimeClient } from './runtime-client.ts';
import type { OutputRecord, Summary } from './runtime-server/executions.ts';
import { PrepareError, prepareSource } from './source.ts';
import type { Run } from './types.ts';
import { writeRunStatus, type StatusWriteDeps } from './status-write.ts';
import { classifyFailure, isShutdownKill, type Collected, type Finisher } from './finish.ts';
import type { RunRecorder } from './artifact-finisher.ts';
import { isArtifactError, stageArtifactInputs } from './artifacts/index.ts';
import {
  isUnsafePathError,
  openDirBeneath,
  PinnedDir,
  removeBeneath,
  withDirBeneath,
  type DirHandle,
} from './artifacts/safe-dir.ts';
import type { SessionRefusal, SessionTarget } from './session-server.ts';
import { SettledAttempts, takenAway, type Resume } from './fence.ts';
import { LostExecution, markLaunched, resumeRun } from './launch-record.ts';
import {
  FUNCTION_FINALIZER,
  FunctionRuns,
  type CallTarget,
  type FunctionHost,
  type FunctionState,
} from './function-runs.ts';
import type { FunctionEndpoint } from '../lib/run/phases.ts';

/** A bad artifact input: terminal with its own reason (never retried). */
export class InputError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

interface Session {
  ops: Set<WebSocket>;
  idle?: NodeJS.Timeout;
  ended: boolean;
}
interface Active {
  run: Run;
  attempt: number;
  timer?: NodeJS.Timeout;
  /** Writes the claim (Running) once the Run outlives CLAIM_DELAY_MS. */
  claimTimer?: NodeJS.Timeout;
  cancelling: boolean;
  timedOut: boolean;
  workdir: string;
  claim?: Promise<Run | undefined>;
  startedAt: string;
  session?: Session;
  fn?: FunctionState;
  /** The Run was taken away (rescheduled): this execution ends without another status write. */
  lost?: boolean;
  released?: boolean;
}

/** Default spec.mode.session.idleTimeoutSeconds. */
export const SESSION_IDLE_SECONDS = 600;

/** Short Runs finish before this and go Scheduled -> terminal in one status write; longer ones are claimed (Running) after it. */
export const CLAIM_DELAY_MS = 200;

export const ARTIFACT_FINALIZER = 'kruntimes.io/artifact-cleanup';
const runPath = (run: Run, sub = ''): string =>
  `/apis/kruntimes.io/v1alpha1/namespaces/${run.metadata.namespace}/runs/${run.metadata.name}${sub}`;

/** Records the store and adds the cleanup finalizer (idempotent) before any artifact is uploaded. */
export function recorderFor(client: KubeClient): RunRecorder {
  return {
    beforeUpload: async (run, spec) => {
      const fresh = await client.get<Run>(runPath(run));
      if (!(fresh.metadata.finalizers ?? []).includes(ARTIFACT_FINALIZER)) {
        await client.patch(runPath(run), {
          metadata: {
            resourceVersion: fresh.metadata.resourceVersion,
            finalizers: [...(fresh.metadata.finalizers ?? []), ARTIFACT_FINALIZER],
          },
        });
      }
      await client.patch(runPath(run, '/status'), { status: { artifactStore: spec } });
    },
  };
}

export interface RunnerDeps {
  client: KubeClient;
  cfg: RuntimedConfig;
  runtime: RuntimeClient;
  log: Logger;
  now: () => Date;
  out: (s: string) => void;
  finisher: Finisher;
}

/** Best-effort Event about a Run (problems and session transitions only; never for plain successes, which stay at three writes). */
function runEvent(d: RunnerDeps, run: Run, e: EventSpec): void {
  const { reason } = e;
  const ev = eventObject(involvedOf(run, 'kruntimes.io/v1alpha1', 'Run'), e, d.now(), `runtimed/${d.cfg.podName}`);
  d.client.create(`/api/v1/namespaces/${run.metadata.namespace}/events`, ev).catch((err: unknown) => {
    if (!isApiError(err, 409)) d.log.warn({ err, run: run.metadata.name, reason }, 'event not recorded');
  });
}

function runEnv(run: Run, workdir: string): Record<string, string> {
  const env: Record<string, string> = Object.fromEntries((run.spec.env ?? []).map((e) => [e.name, e.value ?? '']));
  env.KRUNTIME_OUTPUTS = join(workdir, 'outputs');
  // runtimed (its own uid) checks git sources out; the Run (the image's uid) must still be able to
  // run git in them, which git refuses for a repository another user owns ("dubious ownership").
  // The Run's own environment trusts them, unless the Run configures git through the environment.
  if (env.GIT_CONFIG_COUNT === undefined) {
    env.GIT_CONFIG_COUNT = '1';
    env.GIT_CONFIG_KEY_0 = 'safe.directory';
    env.GIT_CONFIG_VALUE_0 = '*';
  }
  return env;
}

const rvNum = (r: Run): bigint => {
  try {
    return BigInt(r.metadata.resourceVersion ?? '0');
  } catch {
    return 0n;
  }
};

/** How long runtimed waits for its own SIGTERM after the Runtime Server stopped under a Run. */
const SHUTDOWN_SIGNAL_WAIT_MS = 2000;

export class Runner implements FunctionHost {
  readonly active = new Map<string, Active>();
  readonly functions: FunctionRuns = new FunctionRuns(this);
  /** The Runtime Gateway's endpoint for a function Run of this Pod (set when the gateway listens). */
  endpointFor: (run: Run) => FunctionEndpoint | undefined = () => undefined;
  /** Called after a Run was released (its workspace may now be cleaned up). */
  onRelease: () => void = () => undefined;
  private readonly waiting = new Set<string>();
  /** Run UIDs dropped after their handling failed (retake): resumed like Runs of a restarted runtimed. */
  private readonly retaken = new Set<string>();
  /** Attempts released here: a late version of such a Run must not start it again (fence.ts). */
  private readonly settled = new SettledAttempts();
  /** Set when runtimed got SIGTERM: its Pod is being stopped (see stopping()). */
  private stopSignalled = false;
  private readonly stopWaiters: (() => void)[] = [];
  /** When this runtimed started (seconds precision like creationTimestamp, rounded down, with a margin). */
  private readonly bornAt = Math.floor(Date.now() / 1000) * 1000 + 1000;
  /** The workspace root, held open: every Run directory walk starts from it (safe-dir.ts). */
  private readonly root: PinnedDir;

  constructor(readonly d: RunnerDeps) {
    this.root = new PinnedDir(d.cfg.workspaceRoot);
  }

  /** runtimed got SIGTERM (its Pod stops): executions the stopping Runtime Server kills from now on
   * are left to the Pod's fate (the reaper's PodGone, with the Run's retry policy), not failed here. */
  beginStop(): void {
    this.stopSignalled = true;
    for (const w of this.stopWaiters.splice(0)) w();
  }

  /** Whether runtimed is stopping, waiting up to `withinMs` for the SIGTERM that the container
   * runtime sends to every container of a stopping Pod at once (the Runtime Server may see it first). */
  stopping(withinMs: number): Promise<boolean> {
    if (this.stopSignalled || withinMs <= 0) return Promise.resolve(this.stopSignalled);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(this.stopSignalled), withinMs);
      this.stopWaiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }

  event(run: Run, type: 'Normal' | 'Warning', reason: string, message: string, key: string): void {
    runEvent(this.d, run, { type, reason, message, key });
  }

  /** Function mode: the source stays at the workspace root (a referenced PersistentWorkspace's
   * root, else the Run directory) so handler module resolution is relative to the working directory. */
  async stageFunction(run: Run): Promise<string> {
    const ws = run.spec.workspace?.name;
    if (!ws) return this.prepare(run, 'function', () => this.stageInputs(run));
    const staged = await withDirBeneath(await this.root.get(), ['persistent', ws], { create: 0o775 }, (dir) =>
      prepareSource(dir, this.workspaceDir(ws), run.spec.source, 'function'),
    );
    if (staged === undefined) throw new InputError('UnsafePath', `workspace ${ws} could not be opened`);
    await this.stageInputs(run);
    return staged;
  }

  /** The Runtime Gateway's call target for `name` with `uid` in this Pod's namespace. */
  functionTarget(name: string, uid: string): CallTarget {
    const a = [...this.active.values()].find((x) => x.fn && x.run.metadata.name === name);
    return this.functions.target(a, name, uid);
  }

  private path(run: Run, sub = ''): string {
    return `/apis/kruntimes.io/v1alpha1/namespaces/${run.metadata.namespace}/runs/${run.metadata.name}${sub}`;
  }
  /** The Run-local directory (source, outputs, artifacts): /workspace/<uid>, or inside a referenced
   * PersistentWorkspace /workspace/persistent/<ws>/.kruntimes/runs/<uid>. */
  runDir(run: Run): string {
    const uid = run.metadata.uid ?? 'unknown';
    return run.spec.workspace
      ? join(this.workspaceDir(run.spec.workspace.name), '.kruntimes', 'runs', uid)
      : join(this.d.cfg.workspaceRoot, uid);
  }

  workspaceDir(name: string): string {
    return join(this.d.cfg.workspaceRoot, 'persistent', name);
  }

  /** runDir(run) as components below the workspace root. */
  private runDirSegments(run: Run): string[] {
    const uid = run.metadata.uid ?? 'unknown';
    return run.spec.workspace ? ['persistent', run.spec.workspace.name, '.kruntimes', 'runs', uid] : [uid];
  }

  /** workdirOf(run) as components below the workspace root. */
  private workdirSegments(run: Run): string[] {
    if (run.spec.workspace) return ['persistent', run.spec.workspace.name];
    return run.spec.source?.repoURL ? [...this.runDirSegments(run), 'repo'] : this.runDirSegments(run);
  }

  /**
   * Opens (and creates) the Run directory one component at a time from the workspace root, never
   * through a link a Run planted (safe-dir.ts); an UnsafePathError otherwise.
   */
  private async openRunDir(run: Run): Promise<DirHandle> {
    const dir = await openDirBeneath(await this.root.get(), this.runDirSegments(run), { create: 0o775 });
    if (!dir) throw new InputError('UnsafePath', 'Run directory could not be created');
    return dir;
  }

  /** Stages the source (and what `more` adds) in the Run directory; returns the staged source directory. */
  private async prepare(
    run: Run,
    mode: 'task' | 'function',
    more: (dir: DirHandle) => Promise<void> = () => Promise.resolve(),
  ): Promise<string> {
    const dir = await this.openRunDir(run);
    try {
      const staged = await prepareSource(dir, this.runDir(run), run.spec.source, mode);
      await more(dir);
      return staged;
    } finally {
      await dir.close().catch(() => undefined);
    }
  }

  /** Whether a local, non-finished Run uses the workspace (its directory must not be deleted). */
  usesWorkspace(name: string): boolean {
    return [...this.active.values()].some((a) => a.run.spec.workspace?.name === name);
  }

  mine(run: Run): boolean {
    const s = run.status;
    return s?.assignedPod === this.d.cfg.podName && (!s.assignedPodUID || s.assignedPodUID === this.d.cfg.podUID);
  }

  /** Entry point for every observed version of a Run assigned to this Pod. */
  onRun(run: Run): void {
    const uid = run.metadata.uid ?? '';
    const a = this.active.get(uid);
    if (a) {
      this.onActive(a, run);
      return;
    }
    if (this.functionLeftover(run) || !this.startable(run)) return;
    if (run.status?.phase === 'Scheduled' && run.spec.cancelRequested) {
      this.background(run, this.terminal(run, 'Cancelled', 'cancelled by user'));
      return;
    }
    if (this.active.size >= this.d.cfg.workers) {
      this.retryLater(run);
      return;
    }
    void this.start(run).catch((err: unknown) => this.retake(run, err));
  }

  /**
   * A task Run's handling failed past its own error paths (a status write that kept failing: five
   * conflicts in a row, a definite 4xx). Left as it was, its Active would swallow every later
   * version of the Run until runtimed restarted. Instead the Active goes (its execution is left
   * alone) and the Run is taken up again a second later as after a restart: the execution adopted
   * if the Runtime Server still has it, a launched attempt it no longer has failed as lost.
   */
  private retake(run: Run, err: unknown): void {
    const uid = run.metadata.uid ?? '';
    const a = this.active.get(uid);
    this.d.log.error({ err, run: run.metadata.name }, 'run handling failed; taking the Run up again');
    if (!a || a.released || a.lost || a.session || a.fn) return;
    // Nothing of this Active may act any more: a claim it wrote late would find the Run taken
    // up again and abandon (cancel and clean up) the execution the next Active adopted.
    clearTimeout(a.timer);
    clearTimeout(a.claimTimer);
    a.released = true;
    this.active.delete(uid);
    this.retaken.add(uid);
    this.retryLater(a.run);
  }

  /** A Run of this Pod, not being deleted, in a phase runtimed executes, of an attempt not finished here. */
  private startable(run: Run): boolean {
    if (!this.mine(run) || run.metadata.deletionTimestamp || this.settled.finished(run)) return false;
    const phase = run.status?.phase;
    const ready = phase === 'Ready' && !!(run.spec.mode?.session || run.spec.mode?.function);
    return phase === 'Scheduled' || phase === 'Running' || ready;
  }

  /** A function Run of this Pod that ended or is being deleted while nothing runs it here: unregister, drop the finalizer. */
  private functionLeftover(run: Run): boolean {
    if (!this.mine(run) || !(run.metadata.finalizers ?? []).includes(FUNCTION_FINALIZER)) return false;
    if (!run.metadata.deletionTimestamp && !isTerminal(run.status?.phase)) return false;
    void this.functions
      .deleted(undefined, run)
      .catch((err: unknown) => this.d.log.warn({ err, run: run.metadata.name }, 'function cleanup failed'));
    return true;
  }

  private onActive(a: Active, run: Run): void {
    if (run.metadata.deletionTimestamp) {
      this.background(run, this.onDeleted(run));
      return;
    }
    if (rvNum(run) > rvNum(a.run)) {
      if (takenAway(a.run, run)) {
        this.lose(a, run);
        return;
      }
      a.run = run;
    }
    if (run.spec.cancelRequested && !a.cancelling) {
      if (a.session) this.background(run, this.endSession(a, 'Cancelled', 'cancelled by user'));
      else if (a.fn) this.background(run, this.functions.end(a, 'Cancelled', 'cancelled by user'));
      else this.background(run, this.cancel(a));
    }
  }

  /** Work started from an event or a timer: a failure is logged, never an unhandled rejection (which
   * would end runtimed and every Run of its Pod with it). */
  background(run: Run, work: Promise<unknown>): void {
    work.catch((err: unknown) => this.d.log.error({ err, run: run.metadata.name }, 'Run handling failed'));
  }

  private retryLater(run: Run): void {
    const uid = run.metadata.uid ?? '';
    if (this.waiting.has(uid)) return;
    this.waiting.add(uid);
    setTimeout(() => {
      this.waiting.delete(uid);
      void this.refetch(run).then(
        (r) => {
          if (r) this.onRun(r);
        },
        () => this.retryLater(run),
      );
    }, 1000);
  }

  private async refetch(run: Run): Promise<Run | undefined> {
    try {
      return await this.d.client.get<Run>(this.path(run));
    } catch (err) {
      if (isApiError(err, 404)) return undefined;
      throw err;
    }
  }

  /** The Run was rescheduled while this Active ran an older attempt: kill it, write nothing, then
   * take the Run up again if the new attempt is assigned here (fence.ts). */
  private lose(a: Active, observed: Run): void {
    if (a.lost) return;
    a.lost = true;
    this.d.log.warn(
      { run: observed.metadata.name, attempt: a.attempt, now: observed.status?.attempt },
      'Run was rescheduled; abandoning the old execution',
    );
    this.background(a.run, this.abandon(a));
  }

  /** Writes status computed from the freshest Run, retrying conflicts and waiting out an API server
   * that does not answer; undefined when the Run is gone, already terminal, or was taken away from
   * this execution (then nothing is written). See status-write.ts. */
  async writeStatus(a: { run: Run; lost?: boolean }, build: (s: RunStatus) => RunStatus): Promise<Run | undefined> {
    return writeRunStatus(this.statusDeps, a, build);
  }

  private readonly statusDeps: StatusWriteDeps = {
    patch: (run, status) =>
      this.d.client.patch<Run>(this.path(run, '/status'), {
        metadata: { resourceVersion: run.metadata.resourceVersion },
        status,
      }),
    refetch: (run) => this.refetch(run),
    mine: (run) => this.mine(run),
    onRetry: (err, delayMs) =>
      this.d.log.warn({ err: String(err), retryInMs: delayMs }, 'Run status write got no answer; retrying'),
  };

  private async terminal(run: Run, reason: string, message: string): Promise<void> {
    await this.writeStatus({ run }, (s) => terminalFailure(s, this.d.now().toISOString(), reason, message));
  }

  private async start(run: Run): Promise<void> {
    const uid = run.metadata.uid ?? '';
    const a: Active = {
      run,
      attempt: currentAttempt(run.status?.attempt),
      cancelling: false,
      timedOut: false,
      workdir: this.runDir(run),
      startedAt: this.d.now().toISOString(),
    };
    this.active.set(uid, a);
    if (run.spec.mode?.session) {
      await this.startSession(a);
      return;
    }
    if (run.spec.mode?.function) {
      await this.functions.start(a);
      return;
    }
    if (run.status?.phase === 'Running') {
      await this.recover(a);
      return;
    }
    const claimTimer = (a.claimTimer = setTimeout(() => {
      a.claim = this.claim(a);
    }, CLAIM_DELAY_MS));
    let following: Following | undefined;
    try {
      following = await this.launch(a);
    } catch (err) {
      clearTimeout(claimTimer);
      if (err instanceof LostExecution) {
        await this.failed(a, 'ExecutionLost', err.message);
        return;
      }
      if (err instanceof InputError || isUnsafePathError(err)) {
        await this.done(a, err.reason, err.message);
        return;
      }
      await this.failed(
        a,
        err instanceof PrepareError ? 'PrepareSource' : 'RuntimeExecute',
        err instanceof PrepareError
          ? err.message
          : `runtime Execute: ${err instanceof Error ? err.message : String(err)}`,
      );
      return;
    }
    await this.follow(a, 0, () => clearTimeout(claimTimer), following);
  }

  /** The claim write (phase Running, startTime = when runtimed took the Run); abandons the Run if it was taken away. */
  private async claim(a: Active): Promise<Run | undefined> {
    const res = await this.writeStatus(a, (s) =>
      claimed({ ...s, startTime: s.startTime ?? a.startedAt }, this.d.now().toISOString(), a.run.metadata.generation),
    );
    // A released Active (finished, or dropped by retake) has nothing left to abandon: cancelling
    // would kill the execution a later Active of the same Run adopted.
    if (!res && !a.released) await this.abandon(a);
    return res;
  }

  /** Terminal writes wait for an in-flight claim and include startTime when the Run was never claimed. */
  private async settle(a: Active): Promise<void> {
    if (a.claim) await a.claim;
  }

  /** Stages the source and starts the execution (idempotent per Run UID on the Runtime Server),
   * followed in the same request (undefined when adopted: follow it anew).
   * adopt: a Run runtimed may have started before it restarted keeps its execution (no re-staging).
   * Only Runs created before this runtimed started can have one. */
  private async launch(a: Active, adopt = true): Promise<Following | undefined> {
    const run = a.run;
    const resume = adopt ? await this.resume(run) : 'launch';
    if (resume === 'adopt') {
      a.workdir = this.workdirOf(run);
      return undefined;
    }
    if (resume === 'lost') throw new LostExecution();
    const runDir = this.runDir(run);
    const env = runEnv(run, runDir);
    const staged = await this.prepare(run, run.spec.mode?.function ? 'function' : 'task', async (dir) => {
      await removeBeneath(dir, ['outputs']);
      await this.stageInputs(run);
      const artifacts = await this.d.finisher.prepareArtifactsDir(run, dir, runDir);
      if (artifacts) env.KRUNTIME_ARTIFACTS_DIR = artifacts;
      await markLaunched(dir, currentAttempt(run.status?.attempt));
    });
    a.workdir = run.spec.workspace ? this.workspaceDir(run.spec.workspace.name) : staged;
    const inline = run.spec.source?.inline !== undefined;
    // Not on a lease about to lapse (a renewal right after a stall): the execution would be fenced at once.
    await this.d.runtime.leaseHeld();
    return this.d.runtime.executeFollowing({
      id: run.metadata.uid ?? '',
      workingDir: a.workdir,
      env,
      entrypoint: inline ? join(runDir, 'script') : join(staged, run.spec.mode?.task?.entrypoint || 'script'),
      args: inline ? [] : (run.spec.mode?.task?.args ?? []),
    });
  }

  /** Stages spec.artifactInputs into the working directory (opened without following links); bad inputs are terminal (InputError). */
  async stageInputs(run: Run): Promise<void> {
    if (!run.spec.artifactInputs?.length) return;
    if (!this.d.finisher.store)
      throw new InputError(
        'ArtifactInputInvalid',
        'artifact inputs: the Runtime has no spec.artifactStore to read them from',
      );
    try {
      const store = this.d.finisher.store;
      await withDirBeneath(await this.root.get(), this.workdirSegments(run), { create: 0o775 }, (workdir) =>
        stageArtifactInputs(store, run.spec.artifactInputs, workdir.path, { namespace: run.metadata.namespace ?? '' }),
      );
    } catch (err) {
      if (isArtifactError(err) && !err.transient) throw new InputError(err.reason, `artifact inputs: ${err.message}`);
      throw err;
    }
  }

  private workdirOf(run: Run): string {
    if (run.spec.workspace) return this.workspaceDir(run.spec.workspace.name);
    return run.spec.source?.repoURL ? join(this.runDir(run), 'repo') : this.runDir(run);
  }

  /** After a restart: adopt the Runtime Server's execution, fail a Run that ran but is not there, or launch. */
  private async resume(run: Run): Promise<Resume> {
    return resumeRun(
      {
        bornAt: this.bornAt,
        retaken: this.retaken.has(run.metadata.uid ?? ''),
        hasExecution: async (uid) => !!(await this.d.runtime.get(uid).catch(() => undefined)),
        workspaceRoot: await this.root.get(),
        runDirSegments: this.runDirSegments(run),
      },
      run,
    );
  }

  private armDeadline(a: Active): void {
    const timeoutMs = parseDuration(a.run.spec.timeout);
    const start = Date.parse(a.run.status?.startTime ?? a.startedAt);
    if (!timeoutMs || !Number.isFinite(start)) return;
    const left = start + timeoutMs - this.d.now().getTime();
    a.timer = setTimeout(
      () => {
        a.timedOut = true;
        void this.d.runtime.cancel(a.run.metadata.uid ?? '').catch(() => undefined);
      },
      Math.max(0, left),
    );
  }

  /** Follows the execution to its end (over `following`, the launch's request, when there is one). */
  private async follow(a: Active, from = 0, ended: () => void = () => undefined, following?: Following): Promise<void> {
    this.armDeadline(a);
    let summary: Summary;
    const ctx = { pod: this.d.cfg.podName, runtime: this.d.cfg.runtime };
    const onRecord = (rec: OutputRecord): void => this.d.out(logRecord(a.run, ctx, rec, a.attempt));
    try {
      summary = await (following
        ? following(onRecord)
        : this.d.runtime.follow(a.run.metadata.uid ?? '', from, onRecord));
      this.d.out(endRecord(a.run, ctx, a.attempt, this.d.now().toISOString()));
      ended();
    } catch (err) {
      ended();
      clearTimeout(a.timer);
      const lost = (err as { notFound?: boolean }).notFound;
      await this.failed(
        a,
        lost ? 'ExecutionLost' : 'RuntimeError',
        lost ? 'runtime execution not found' : `runtime Status: ${(err as Error).message}`,
      );
      return;
    }
    clearTimeout(a.timer);
    await this.finish(a, summary);
  }

  private async finish(a: Active, s: Summary): Promise<void> {
    if (a.lost) {
      await this.release(a);
      return;
    }
    if (a.cancelling) {
      await this.done(a, 'Cancelled', 'cancelled by user');
      return;
    }
    if (a.timedOut) {
      await this.failed(a, 'Timeout', `timeout after ${formatDuration(parseDuration(a.run.spec.timeout) ?? 0)}`);
      return;
    }
    if (s.state !== 'SUCCEEDED' && isShutdownKill(s) && (await this.stopping(SHUTDOWN_SIGNAL_WAIT_MS))) {
      // The Pod stops: its Runtime Server killed the execution on its way out. Not the Run's
      // failure: left to the Pod's fate (PodGone, then the Run's retry policy).
      this.d.log.info({ run: a.run.metadata.name }, 'Runtime Pod stopping: the Run is left to the reaper');
      await this.release(a);
      return;
    }
    if (s.state !== 'SUCCEEDED') {
      const f = classifyFailure(s);
      await this.failed(a, f.reason, f.message);
      return;
    }
    const result = await this.collect(a.run);
    if (!result.ok) {
      if (result.transient) {
        setTimeout(() => this.background(a.run, this.finish(a, s)), 1000);
        return;
      }
      await this.done(a, result.reason, result.message);
      return;
    }
    await this.settle(a);
    await this.writeStatus(a, (st) =>
      succeeded(this.started(a, st), this.d.now().toISOString(), result.outputs, result.artifactRefs),
    );
    await this.release(a);
  }

  /** Outputs and artifacts from the Run directory, opened without following a link the Run planted. */
  private async collect(run: Run): Promise<Collected> {
    let dir: DirHandle | undefined;
    try {
      dir = await openDirBeneath(await this.root.get(), this.runDirSegments(run));
    } catch (err) {
      if (isUnsafePathError(err)) return { ok: false, reason: err.reason, message: `Run directory: ${err.message}` };
      throw err;
    }
    if (!dir) return { ok: true, outputs: undefined, artifactRefs: undefined };
    try {
      return await this.d.finisher.collect(run, dir);
    } finally {
      await dir.close().catch(() => undefined);
    }
  }

  /** A failed attempt: retry in place when the policy allows, otherwise the terminal phase. */
  private async failed(a: Active, reason: string, message: string): Promise<void> {
    if (a.cancelling) {
      await this.done(a, 'Cancelled', 'cancelled by user');
      return;
    }
    if (!shouldRetry(a.run.spec.retryPolicy, a.attempt, reason)) {
      await this.done(a, reason, message);
      return;
    }
    await this.settle(a);
    const written = await this.writeStatus(a, (s) =>
      retryScheduled(
        claimed(this.started(a, s), this.d.now().toISOString()),
        this.d.now().toISOString(),
        reason,
        message,
      ),
    );
    if (!written) {
      await this.release(a);
      return;
    }
    runEvent(this.d, a.run, {
      type: 'Warning',
      reason,
      message: `attempt ${a.attempt} failed: ${message}; retrying`,
      key: `attempt-${a.attempt}`,
    });
    a.attempt = currentAttempt(written.status?.attempt);
    await new Promise((r) => setTimeout(r, backoffMs(a.run.spec.retryPolicy, a.attempt)));
    if (a.cancelling) {
      await this.done(a, 'Cancelled', 'cancelled by user');
      return;
    }
    if (!(await this.writeStatus(a, (s) => retryStarted(s, this.d.now().toISOString())))) {
      await this.release(a);
      return;
    }
    await this.d.runtime.forget(a.run.metadata.uid ?? '').catch(() => undefined);
    await this.launch(a, false).then(
      (following) => this.follow(a, 0, undefined, following),
      (err: unknown) =>
        err instanceof InputError || isUnsafePathError(err)
          ? this.done(a, err.reason, err.message)
          : this.failed(a, err instanceof PrepareError ? 'PrepareSource' : 'RuntimeExecute', (err as Error).message),
    );
  }

  /** Status as if claimed: a Run that ends before its claim write still reports startTime and attempt. */
  started(a: { run: Run; startedAt: string }, s: RunStatus): RunStatus {
    return { ...s, startTime: s.startTime ?? a.startedAt, attempt: s.attempt && s.attempt > 0 ? s.attempt : 1 };
  }

  private async done(a: Active, reason: string, message: string): Promise<void> {
    await this.settle(a);
    const written = await this.writeStatus(a, (s) =>
      terminalFailure(this.started(a, s), this.d.now().toISOString(), reason, message),
    );
    if (written)
      runEvent(this.d, a.run, {
        type: reason === 'Cancelled' ? 'Normal' : 'Warning',
        reason,
        message,
        key: 'terminal',
      });
    await this.release(a);
  }

  private async cancel(a: Active): Promise<void> {
    a.cancelling = true;
    await this.d.runtime.cancel(a.run.metadata.uid ?? '').catch(() => undefined);
  }

  /** After runtimed restarted: adopt the execution if the Runtime Server still has it. */
  private async recover(a: Active): Promise<void> {
    const uid = a.run.metadata.uid ?? '';
    const known = await this.d.runtime.get(uid);
    if (!known) {
      await this.failed(a, 'ExecutionLost', 'runtime execution not found after runtimed restart');
      return;
    }
    a.workdir = this.workdirOf(a.run);
    await this.follow(a);
  }

  private async abandon(a: Active): Promise<void> {
    if (a.fn) {
      await this.functions.abandon(a);
      return;
    }
    await this.d.runtime.cancel(a.run.metadata.uid ?? '').catch(() => undefined);
    await this.release(a);
  }

  /** Forgets the execution now, retried while the Runtime Server does not answer (a running one stays). */
  private async forgetNow(uid: string): Promise<void> {
    for (let i = 0; i < 50; i++) {
      try {
        await this.d.runtime.forget(uid);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async release(a: Active): Promise<void> {
    if (a.released) return;
    a.released = true;
    clearTimeout(a.timer);
    if (a.session) {
      a.session.ended = true;
      clearTimeout(a.session.idle);
      for (const ws of a.session.ops) ws.close(1001, 'session ended');
    }
    const uid = a.run.metadata.uid ?? '';
    // A Run whose result was written is not looked for again: forgotten with the next execute
    // request (runtime-client.ts), no request of its own in a burst. Any other (taken away, its
    // write refused, handed back) may be taken up again at once, here, by a new attempt: the old
    // execution must be gone first, or that attempt would adopt it (or execute would return it,
    // being idempotent per Run UID) and end with the old one's result.
    if (isTerminal(a.run.status?.phase)) this.d.runtime.forgetLater(uid);
    else await this.forgetNow(uid);
    await removeBeneath(await this.root.get(), this.runDirSegments(a.run)).catch((err: unknown) =>
      this.d.log.warn({ err, run: a.run.metadata.name }, 'Run directory not removed'),
    );
    if (this.active.get(uid) === a) this.active.delete(uid);
    this.retaken.delete(uid);
    this.settled.settle(uid, Math.max(a.attempt, currentAttempt(a.run.status?.attempt)));
    if (a.run.spec.workspace) this.onRelease();
    if (a.lost)
      void this.refetch(a.run).then(
        (r) => r && this.onRun(r),
        () => undefined,
      );
  }

  /** A session Run: stage source and inputs, go Ready, then serve operations until cancel, timeout or idle. */
  private async startSession(a: Active): Promise<void> {
    const run = a.run;
    if (run.status?.phase === 'Ready') {
      a.workdir = this.workdirOf(run);
      await withDirBeneath(await this.root.get(), this.workdirSegments(run), { create: 0o775 }, () =>
        Promise.resolve(),
      );
    } else {
      try {
        const staged = await this.prepare(run, 'task', () => this.stageInputs(run));
        a.workdir = run.spec.workspace ? this.workspaceDir(run.spec.workspace.name) : staged;
      } catch (err) {
        const reason =
          err instanceof InputError || isUnsafePathError(err)
            ? err.reason
            : err instanceof PrepareError
              ? 'PrepareSource'
              : 'SessionSetup';
        await this.done(a, reason, err instanceof Error ? err.message : String(err));
        return;
      }
      if (
        !(await this.writeStatus(a, (s) =>
          sessionReady(this.started(a, s), this.d.now().toISOString(), run.metadata.generation),
        ))
      ) {
        await this.release(a);
        return;
      }
      runEvent(this.d, a.run, {
        type: 'Normal',
        reason: 'SessionReady',
        message: `session is ready on Runtime Pod ${this.d.cfg.podName}`,
        key: 'ready',
      });
    }
    a.session = { ops: new Set(), ended: false };
    const timeoutMs = parseDuration(run.spec.timeout);
    const start = Date.parse(a.run.status?.startTime ?? a.startedAt);
    if (timeoutMs && Number.isFinite(start)) {
      a.timer = setTimeout(
        () => this.background(a.run, this.endSession(a, 'Timeout', `timeout after ${formatDuration(timeoutMs)}`)),
        Math.max(0, start + timeoutMs - this.d.now().getTime()),
      );
    }
    this.armIdle(a);
    if (run.spec.cancelRequested) await this.endSession(a, 'Cancelled', 'cancelled by user');
  }

  private armIdle(a: Active): void {
    const s = a.session;
    if (!s || s.ended) return;
    clearTimeout(s.idle);
    if (s.ops.size) return;
    const secs = a.run.spec.mode?.session?.idleTimeoutSeconds ?? SESSION_IDLE_SECONDS;
    s.idle = setTimeout(
      () =>
        this.background(a.run, this.endSession(a, 'SessionIdle', `session ended after ${secs}s without an operation`)),
      secs * 1000,
    );
  }

  /** Ends a session: closes its operations (their processes are killed) and writes the terminal status. */
  private async endSession(a: Active, reason: string, message: string): Promise<void> {
    const s = a.session;
    if (!s || s.ended) return;
    s.ended = true;
    a.cancelling = reason === 'Cancelled';
    clearTimeout(s.idle);
    clearTimeout(a.timer);
    for (const ws of s.ops) ws.close(1001, reason);
    const now = this.d.now().toISOString();
    runEvent(this.d, a.run, { type: reason === 'Timeout' ? 'Warning' : 'Normal', reason, message, key: 'terminal' });
    await this.writeStatus(a, (st) => sessionEnded(st, now, reason, message));
    await this.release(a);
  }

  /** The name of the Run with this UID running on this Pod (the gateway checks a URL's name against it). */
  activeRunName(uid: string): string | undefined {
    return this.active.get(uid)?.run.metadata.name;
  }

  /** The session endpoint's view of a Run UID: a target while the session is Ready on this Pod, else why not. */
  sessionTarget(uid: string): SessionTarget | SessionRefusal {
    const a = this.active.get(uid);
    if (!a?.session) return { code: 409, message: `Run ${uid} has no Ready session on this Runtime Pod` };
    if (a.session.ended) return { code: 409, message: `the session of Run ${a.run.metadata.name} has ended` };
    const max = this.d.cfg.sessionMaxOperations;
    if (a.session.ops.size >= max)
      return {
        code: 429,
        message: `the session of Run ${a.run.metadata.name} already has ${a.session.ops.size} operations (at most ${max}); end one and retry`,
      };
    const session = a.session;
    return {
      spec: {
        id: uid,
        command: a.run.spec.mode?.session?.command ?? [],
        workingDir: a.workdir,
        env: runEnv(a.run, this.runDir(a.run)),
      },
      attach: (ws) => {
        session.ops.add(ws);
        clearTimeout(session.idle);
        ws.once('close', () => {
          session.ops.delete(ws);
          this.armIdle(a);
        });
      },
    };
  }

  /** The Run object was deleted: stop its execution without writing status. */
  async onDeleted(run: Run): Promise<void> {
    const a = this.active.get(run.metadata.uid ?? '');
    if (a?.fn || (run.metadata.finalizers ?? []).includes(FUNCTION_FINALIZER)) {
      if (a?.fn?.ended) return;
      await this.functions.deleted(a, run);
      return;
    }
    if (!a) return;
    a.cancelling = true;
    await this.abandon(a);
  }
}
