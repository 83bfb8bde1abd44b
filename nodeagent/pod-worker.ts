/**
 * Runs one Pod: volumes, init containers, containers with restart policy and probes, status
 * reporting, graceful termination and the final delete the kubelet owes the API server.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { PatchType, type KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { launch, signal, exitCode, type Running, type Mount } from './container.ts';
import { containerEnv, expandVars, EnvError, type DataSource } from './env.ts';
import { effectiveArgv, resolveImage } from './images.ts';
import {
  buildPodStatus,
  restartBackoff,
  shouldRestart,
  type Backoff,
  type ContainerView,
  type PodView,
} from './pod-status.ts';
import type { Container, Pod } from './pod-types.ts';
import { ProbeLoop, runProbe } from './probes.ts';
import { containerIdentity, setprivArgs, verifyRunAsNonRoot, type Identity } from './security-context.ts';
import { prepareVolume, removePodDir, VolumeError, type PreparedVolume } from './volumes.ts';
import { TimerSet } from '../lib/timers.ts';

/** How often configMap/secret/projected volume contents are re-synced (the kubelet does about every minute). */
const VOLUME_SYNC_MS = 10_000;

/**
 * When a volume that failed to set up is tried again: 100 ms, doubling to 2 s. The first failure
 * is often a race, not a fault: a service-account token for a Pod just bound to this node is refused
 * (403, "no relationship found between node ... and this object") until the API server's node
 * authorizer has seen the binding, a few ms later. A flat 2 s delayed half the Runtime Pods' starts
 * by 2 s (issue 17); the kubelet retries a failed mount after 500 ms, doubling.
 */
export function volumeRetryMs(attempt: number): number {
  return Math.min(2000, 100 * 2 ** Math.min(attempt, 10));
}

export interface WorkerDeps {
  client: KubeClient;
  data: DataSource;
  log: Logger;
  nodeName: string;
  podDir: string;
  podIP: string;
  hostIP: string;
  repoRoot: string;
  clusterCa: string;
  baseEnv: Record<string, string>;
  now: () => Date;
  onGone: () => void;
}

interface Slot {
  view: ContainerView;
  running?: Running;
  /** The readiness probe of the running instance, when the container has one. */
  readiness?: ProbeLoop;
  timers: TimerSet;
  env: Record<string, string>;
  user?: Identity;
  backoff?: Backoff;
}

export class PodWorker {
  private pod: Pod;
  private readonly init: Slot[];
  private readonly main: Slot[];
  private volumes = new Map<string, PreparedVolume>();
  private readonly startTime: string;
  private initialized = false;
  private sandboxReady = false;
  private failed: PodView['failed'];
  private started = false;
  private terminating = false;
  private stopped = false;
  private flushing: Promise<void> | undefined;
  private dirty = false;
  private lastSent = '';
  private readonly timers = new TimerSet();

  constructor(
    pod: Pod,
    private readonly d: WorkerDeps,
  ) {
    this.pod = pod;
    this.startTime = pod.status?.startTime ?? d.now().toISOString();
    const prev = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s.restartCount]));
    const slot = (c: Container, restarts: number): Slot => ({
      view: {
        spec: c,
        state: { waiting: { reason: 'ContainerCreating' } },
        restartCount: restarts,
        ready: false,
        started: false,
        willRestart: false,
      },
      timers: new TimerSet(),
      env: {},
    });
    this.init = (pod.spec.initContainers ?? []).map((c) => slot(c, 0));
    this.main = pod.spec.containers.map((c) => slot(c, prev.get(c.name) ?? 0));
  }

  get uid(): string {
    return this.pod.metadata.uid ?? '';
  }

  update(pod: Pod): void {
    this.pod = pod;
    if (pod.metadata.deletionTimestamp) {
      void this.terminate();
      return;
    }
    if (!this.started) {
      this.started = true;
      void this.start();
    }
    // As the kubelet's sync of a Pod does: a running container not ready yet is probed at once.
    for (const s of this.main) s.readiness?.trigger();
  }

  private async start(): Promise<void> {
    const phase = this.pod.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') {
      this.stopped = true;
      return;
    }
    this.armDeadline();
    const seen = performance.now();
    try {
      await this.prepareVolumes();
      const volumesMs = Math.round(performance.now() - seen);
      this.sandboxReady = true;
      this.markDirty();
      for (const s of this.init) if (!(await this.runInit(s))) return;
      this.initialized = true;
      for (const s of this.main) await this.startContainer(s);
      // Where a Pod's start went (issue 17): since the agent saw it bound, the volumes' part.
      this.d.log.info({ volumesMs, launchedMs: Math.round(performance.now() - seen) }, 'pod containers launched');
    } catch (err) {
      this.d.log.error({ err }, 'pod start failed');
    }
    this.markDirty();
  }

  private armDeadline(): void {
    const secs = this.pod.spec.activeDeadlineSeconds;
    if (!secs) return;
    const left = Date.parse(this.startTime) + secs * 1000 - this.d.now().getTime();
    this.timers.after(Math.max(0, left), () => {
      this.failed = {
        reason: 'DeadlineExceeded',
        message: `Pod was active on the node longer than the specified deadline (${secs}s)`,
      };
      this.killAll('SIGKILL');
      this.markDirty();
    });
  }

  private async prepareVolumes(): Promise<void> {
    for (const v of this.pod.spec.volumes ?? []) {
      for (let attempt = 0; ; attempt++) {
        try {
          const pv = await prepareVolume(this.volumeCtx(), v);
          this.volumes.set(v.name, pv);
          if (v.configMap || v.secret || v.projected || v.downwardAPI)
            this.scheduleRefresh(v.name, Math.min(pv.refreshAt ?? Infinity, this.d.now().getTime() + VOLUME_SYNC_MS));
          break;
        } catch (err) {
          if (this.terminating) throw err;
          const reason = err instanceof VolumeError ? err.reason : 'VolumeSetupFailed';
          const retryMs = volumeRetryMs(attempt);
          this.d.log.warn({ err, volume: v.name, reason, retryMs }, 'volume setup failed; retrying');
          this.setWaitingAll(reason, `volume "${v.name}": ${(err as Error).message}`);
          await sleep(retryMs);
        }
      }
    }
  }

  private volumeCtx(): Parameters<typeof prepareVolume>[0] {
    return {
      pod: this.pod,
      podDir: this.d.podDir,
      client: this.d.client,
      data: this.d.data,
      clusterCa: this.d.clusterCa,
      podIP: this.d.podIP,
      hostIP: this.d.hostIP,
      now: () => this.d.now().getTime(),
    };
  }

  private readonly tokenDue = new Map<string, number>();

  private scheduleRefresh(name: string, at: number): void {
    const pv0 = this.volumes.get(name);
    if (pv0?.refreshAt && !this.tokenDue.has(name)) this.tokenDue.set(name, pv0.refreshAt);
    this.timers.after(Math.max(1000, at - this.d.now().getTime()), () => {
      const v = (this.pod.spec.volumes ?? []).find((x) => x.name === name);
      if (!v || this.terminating) return;
      const due = this.tokenDue.get(name);
      const refreshTokens = due !== undefined && this.d.now().getTime() >= due;
      prepareVolume({ ...this.volumeCtx(), refreshTokens }, v)
        .then((pv) => {
          if (pv.refreshAt) this.tokenDue.set(name, pv.refreshAt);
          this.scheduleRefresh(
            name,
            Math.min(this.tokenDue.get(name) ?? Infinity, this.d.now().getTime() + VOLUME_SYNC_MS),
          );
        })
        .catch((err: unknown) => {
          this.d.log.warn({ err, volume: name }, 'volume refresh failed');
          this.scheduleRefresh(name, Date.now() + 10_000);
        });
    });
  }

  private setWaitingAll(reason: string, message: string): void {
    for (const s of [...this.init, ...this.main]) if (!s.running) s.view.state = { waiting: { reason, message } };
    this.markDirty();
  }

  private async runInit(s: Slot): Promise<boolean> {
    for (;;) {
      if (this.terminating) return false;
      if (!(await this.startContainer(s))) return false;
      const exit = await s.running!.exited;
      const code = exitCode(exit);
      if (code === 0) return true;
      if (this.pod.spec.restartPolicy === 'Never') return false;
      s.backoff = restartBackoff(s.backoff, this.d.now().getTime());
      await sleep(s.backoff.delayMs);
      s.view.restartCount++;
    }
  }

  /** Resolves image, env and mounts, then launches; false when the container cannot start. */
  private async startContainer(s: Slot): Promise<boolean> {
    const c = s.view.spec;
    const image = resolveImage(c.image, this.d.repoRoot);
    if (!image.ok) {
      s.view.state = { waiting: { reason: image.reason, message: image.message } };
      this.markDirty();
      return false;
    }
    const nonRoot = verifyRunAsNonRoot(this.pod, c, image.config.user);
    const user = containerIdentity(this.pod, c, image.config.user);
    if (nonRoot || typeof user === 'string') {
      s.view.state = {
        waiting: nonRoot
          ? { reason: 'CreateContainerConfigError', message: nonRoot }
          : { reason: 'CreateContainerError', message: user as string },
      };
      this.markDirty();
      return false;
    }
    s.user = user;
    // As a runtime does for a user without a passwd entry: HOME=/ (unwritable), never root's.
    const home: Record<string, string> = user.uid === 0 ? {} : { HOME: '/' };
    try {
      s.env = await containerEnv(
        this.pod,
        c,
        this.d.data,
        { ...this.d.baseEnv, ...home, ...image.config.env, PATH: image.config.path.join(':') },
        { pod: this.d.podIP, host: this.d.hostIP },
      );
    } catch (err) {
      const reason = err instanceof EnvError ? err.reason : 'CreateContainerConfigError';
      s.view.state = { waiting: { reason, message: (err as Error).message } };
      this.markDirty();
      this.timers.after(3000, () => {
        if (!this.terminating) void this.startContainer(s);
      });
      return false;
    }
    const argv = effectiveArgv(image.config, c.command, c.args).map((a) => expandVars(a, s.env));
    if (argv.length === 0) {
      s.view.state = {
        waiting: { reason: 'CreateContainerError', message: 'no command specified and the image has no entrypoint' },
      };
      this.markDirty();
      return false;
    }
    this.launchSlot(s, argv);
    return true;
  }

  private mounts(c: Container): Mount[] {
    const mounts = (c.volumeMounts ?? []).map((m) => {
      const v = this.volumes.get(m.name);
      if (!v) throw new Error(`volumeMount ${m.name}: no such volume`);
      return {
        hostPath: m.subPath ? join(v.hostPath, m.subPath) : v.hostPath,
        mountPath: m.mountPath,
        readOnly: v.readOnly || !!m.readOnly,
      };
    });
    return withContainerTmp(mounts, () => containerTmp(this.d.podDir, c.name), this.d.repoRoot);
  }

  private launchSlot(s: Slot, argv: string[]): void {
    const c = s.view.spec;
    const startedAt = this.d.now().toISOString();
    const logFile = join(this.d.podDir, 'logs', c.name, `${s.view.restartCount}.log`);
    const r = launch({
      argv,
      env: s.env,
      workingDir: c.workingDir ?? '/',
      mounts: this.mounts(c),
      logFile,
      user: s.user ? setprivArgs(s.user) : [],
    });
    s.running = r;
    writePidFile(join(this.d.podDir, 'pids', c.name), r.pid);
    s.view.containerID = `kruntimes://${this.uid}/${c.name}/${s.view.restartCount}`;
    s.view.state = { running: { startedAt } };
    s.view.started = true;
    s.view.willRestart = false;
    s.view.ready = !c.readinessProbe;
    this.startProbes(s);
    this.markDirty();
    void r.exited.then((e) => this.onExit(s, r, startedAt, exitCode(e)));
  }

  private startProbes(s: Slot): void {
    const c = s.view.spec;
    const target = {
      podIP: this.d.podIP,
      env: s.env,
      container: c,
      pid: () => s.running?.pid ?? 0,
      user: s.user ? setprivArgs(s.user) : [],
    };
    const loop = (
      probe: NonNullable<Container['readinessProbe']>,
      onFlip: (ok: boolean) => void,
      initial: boolean,
    ): ProbeLoop => {
      const l = new ProbeLoop({
        probe,
        run: () => runProbe(probe, target),
        onFlip,
        initial,
        active: () => !!s.running && !this.terminating,
        schedule: (f, ms) => s.timers.after(ms, f),
        now: () => performance.now(),
      });
      l.start();
      return l;
    };
    if (c.readinessProbe)
      s.readiness = loop(
        c.readinessProbe,
        (ok) => {
          s.view.ready = ok;
          this.markDirty();
        },
        false,
      );
    if (c.livenessProbe)
      loop(
        c.livenessProbe,
        (ok) => {
          if (!ok && s.running) signal(s.running, 'SIGKILL');
        },
        true,
      );
  }

  private onExit(s: Slot, r: Running, startedAt: string, code: number): void {
    s.timers.clear();
    s.readiness = undefined;
    if (s.running === r) s.running = undefined;
    s.view.ready = false;
    s.view.state = {
      terminated: {
        exitCode: code,
        reason: code === 0 ? 'Completed' : 'Error',
        startedAt,
        finishedAt: this.d.now().toISOString(),
        ...(s.view.containerID ? { containerID: s.view.containerID } : {}),
      },
    };
    const isInit = this.init.includes(s);
    const restart = !isInit && !this.terminating && !this.failed && shouldRestart(this.pod.spec.restartPolicy, code);
    s.view.willRestart = restart;
    if (restart) {
      s.backoff = restartBackoff(s.backoff, this.d.now().getTime());
      const delay = s.backoff.delayMs;
      s.timers.after(delay, () => {
        if (this.terminating) return;
        s.view.lastState = s.view.state;
        s.view.restartCount++;
        void this.startContainer(s);
      });
    }
    this.markDirty();
  }

  private killAll(sig: NodeJS.Signals): void {
    for (const s of [...this.init, ...this.main]) if (s.running) signal(s.running, sig);
  }

  private async terminate(): Promise<void> {
    if (this.terminating) return;
    this.terminating = true;
    this.timers.clear();
    const grace = Math.min(
      this.pod.metadata.deletionGracePeriodSeconds ?? 30,
      this.pod.spec.terminationGracePeriodSeconds ?? 30,
    );
    await this.stopContainers(grace * 1000);
    await this.flush();
    try {
      await this.d.client.delete(`/api/v1/namespaces/${this.pod.metadata.namespace}/pods/${this.pod.metadata.name}`, {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        gracePeriodSeconds: 0,
        preconditions: { uid: this.uid },
      });
    } catch (err) {
      if (!isApiError(err, 404) && !isApiError(err, 409)) this.d.log.warn({ err }, 'final pod delete failed');
    }
    this.cleanup();
  }

  /** SIGTERM, wait up to graceMs, then SIGKILL; resolves when every process is gone. */
  async stopContainers(graceMs: number): Promise<void> {
    const running = [...this.init, ...this.main].flatMap((s) => (s.running ? [s.running] : []));
    for (const s of [...this.init, ...this.main]) {
      s.timers.clear();
      s.view.willRestart = false;
    }
    for (const r of running) signal(r, 'SIGTERM');
    const all = Promise.all(running.map((r) => r.exited));
    const timer = new Promise<void>((res) => this.timers.after(graceMs, res));
    await Promise.race([all, timer]);
    for (const r of running) signal(r, 'SIGKILL');
    await all;
  }

  /** The log file of a container instance for /containerLogs, or an HTTP error. */
  logFile(
    container: string,
    previous: boolean,
  ): { file: string; running: () => boolean } | { error: string; code: number } {
    const name = this.pod.metadata.name ?? '';
    const s = [...this.init, ...this.main].find((x) => x.view.spec.name === container);
    if (!s) return { code: 400, error: `container ${container} is not valid for pod ${name}` };
    const n = previous ? s.view.restartCount - 1 : s.view.restartCount;
    if (n < 0) return { code: 400, error: `previous terminated container "${container}" in pod "${name}" not found` };
    if (!previous && !s.view.started) {
      const reason = 'waiting' in s.view.state ? s.view.state.waiting.reason : 'unknown';
      return { code: 400, error: `container "${container}" in pod "${name}" is waiting to start: ${reason}` };
    }
    return {
      file: join(this.d.podDir, 'logs', container, `${n}.log`),
      running: () => !previous && !!s.running && s.view.restartCount === n,
    };
  }

  /** The Pod object is gone (force-deleted): stop everything now. */
  async forget(): Promise<void> {
    this.terminating = true;
    await this.stopContainers(2000);
    this.cleanup();
  }

  private cleanup(): void {
    this.stopped = true;
    this.timers.clear();
    try {
      removePodDir(this.d.podDir);
    } catch (err) {
      this.d.log.warn({ err, podDir: this.d.podDir }, 'pod directory removal failed');
    }
    this.d.onGone();
  }

  private view(): PodView {
    return {
      podIP: this.d.podIP,
      hostIP: this.d.hostIP,
      startTime: this.startTime,
      initialized: this.initialized,
      initContainers: this.init.map((s) => s.view),
      containers: this.main.map((s) => s.view),
      sandboxReady: this.sandboxReady,
      ...(this.failed ? { failed: this.failed } : {}),
    };
  }

  private markDirty(): void {
    if (this.stopped) return;
    this.dirty = true;
    if (!this.flushing)
      this.flushing = this.flushLoop().finally(() => {
        this.flushing = undefined;
      });
  }

  private async flush(): Promise<void> {
    this.markDirty();
    await this.flushing;
  }

  private async flushLoop(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      await new Promise((r) => setImmediate(r));
      const status = buildPodStatus(this.view(), this.d.now().toISOString(), this.pod.status?.conditions);
      const body = JSON.stringify({ status });
      if (body === this.lastSent) continue;
      try {
        await this.d.client.patch(
          `/api/v1/namespaces/${this.pod.metadata.namespace}/pods/${this.pod.metadata.name}/status`,
          body,
          PatchType.strategic,
        );
        this.lastSent = body;
      } catch (err) {
        if (isApiError(err, 404)) return;
        this.d.log.warn({ err }, 'pod status update failed; retrying');
        this.dirty = true;
        await sleep(500);
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const isTmp = (m: Mount): boolean => m.mountPath.replace(/\/+$/, '') === '/tmp';

/**
 * The container's mounts with its /tmp: the Pod's own volume at /tmp, else a private one (`ownTmp`),
 * as its own root filesystem gives it on a kubelet (a shared host /tmp would let one container plant
 * files another one's tools read). A checkout under the host's /tmp (a CI clone) holds the images'
 * files and the Pods' own directories: it stays visible at its own path above the container's /tmp,
 * also when the Pod mounts a volume there (the devws Git Server's and the dashboard's emptyDir: their
 * `kruntimes` entrypoint was not found in a clone under /tmp).
 */
export function withContainerTmp(mounts: Mount[], ownTmp: () => string, repoRoot: string): Mount[] {
  const podTmp = mounts.find(isTmp);
  const tmp = podTmp ?? { hostPath: ownTmp(), mountPath: '/tmp', readOnly: false };
  const root = repoRoot.replace(/\/+$/, '');
  const keep = root.startsWith('/tmp/') ? [{ hostPath: root, mountPath: root, readOnly: false }] : [];
  return [tmp, ...keep, ...mounts.filter((m) => m !== podTmp)];
}

/** A container's private /tmp (sticky, world-writable like a root filesystem's). */
function containerTmp(podDir: string, container: string): string {
  const dir = join(podDir, 'tmp', container);
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o1777);
  return dir;
}

/** The container's main pid, for operators and tests (like a CRI's container state). */
function writePidFile(file: string, pid: number): void {
  try {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${pid}\n`);
  } catch {
    /* informational only */
  }
}
