/** exec, httpGet and tcpSocket probes with the kubelet's timing and threshold semantics. */
import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type { Container, Probe } from './pod-types.ts';

/** pid: the container's main process, whose mount namespace exec probes enter. */
export interface ProbeTarget {
  podIP: string;
  env: Record<string, string>;
  container: Container;
  pid: () => number;
  /** setpriv arguments of the container's user: exec probes run as the container does. */
  user?: string[];
}

function port(p: number | string, c: Container): number {
  if (typeof p === 'number') return p;
  const named = c.ports?.find((x) => x.name === p);
  return named ? named.containerPort : Number(p);
}

export function runProbe(probe: Probe, t: ProbeTarget): Promise<boolean> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
  if (probe.exec) {
    const pid = t.pid();
    if (!pid) return Promise.resolve(false);
    return new Promise((resolve) => {
      execFile(
        'nsenter',
        ['--target', String(pid), '--mount', '--', ...(t.user ?? []), ...probe.exec!.command],
        { env: t.env, timeout: timeoutMs },
        (err) => resolve(!err),
      );
    });
  }
  if (probe.httpGet) {
    const g = probe.httpGet;
    const req = g.scheme === 'HTTPS' ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      const r = req(
        {
          host: g.host ?? t.podIP,
          port: port(g.port, t.container),
          path: g.path ?? '/',
          timeout: timeoutMs,
          rejectUnauthorized: false,
        },
        (res) => {
          res.resume();
          const s = res.statusCode ?? 0;
          resolve(s >= 200 && s < 400);
        },
      );
      r.on('error', () => resolve(false));
      r.on('timeout', () => {
        r.destroy();
        resolve(false);
      });
      r.end();
    });
  }
  if (probe.tcpSocket) {
    const s = probe.tcpSocket;
    return new Promise((resolve) => {
      const sock = connect({ host: s.host ?? t.podIP, port: port(s.port, t.container), timeout: timeoutMs }, () => {
        sock.destroy();
        resolve(true);
      });
      sock.on('error', () => resolve(false));
      sock.on('timeout', () => {
        sock.destroy();
        resolve(false);
      });
    });
  }
  return Promise.resolve(true);
}

/**
 * How long after a probe ended the next one starts. The kubelet's prober runs on a ticker: probes
 * start every period, measured start to start, so a probe's own duration (up to its timeout) does
 * not push the next one back; after one that took longer than the period the next starts at once.
 */
export function nextProbeInMs(probe: Probe, startedAt: number, endedAt: number): number {
  return Math.max(0, (probe.periodSeconds ?? 10) * 1000 - (endedAt - startedAt));
}

/** Tracks consecutive results against success/failure thresholds. */
export class ProbeState {
  private successes = 0;
  private failures = 0;
  result: boolean;
  constructor(
    private readonly probe: Probe,
    initial: boolean,
  ) {
    this.result = initial;
  }

  /** Records one outcome; returns true when the thresholded result flipped. */
  record(ok: boolean): boolean {
    if (ok) {
      this.successes++;
      this.failures = 0;
    } else {
      this.failures++;
      this.successes = 0;
    }
    const before = this.result;
    if (ok && this.successes >= (this.probe.successThreshold ?? 1)) this.result = true;
    if (!ok && this.failures >= (this.probe.failureThreshold ?? 3)) this.result = false;
    return before !== this.result;
  }
}

export interface ProbeLoopDeps {
  probe: Probe;
  /** One probe of the container: whether it passed. */
  run: () => Promise<boolean>;
  /** The thresholded result flipped. */
  onFlip: (ok: boolean) => void;
  initial: boolean;
  /** Whether the container still runs: a loop whose container stopped probes no more. */
  active: () => boolean;
  schedule: (f: () => void, ms: number) => void;
  now: () => number;
}

/**
 * One probe of one container, as the kubelet's prober worker runs it: every period measured start
 * to start (nextProbeInMs), from initialDelaySeconds after the start on. trigger() runs one at once
 * while the result is still false and none is in flight, as the kubelet does for a running container
 * that is not ready yet whenever it syncs the Pod: a Pod turns Ready when its container is, not at
 * the next period (issue 17).
 */
export class ProbeLoop {
  private readonly st: ProbeState;
  private inFlight = false;
  private startedAt = 0;

  constructor(private readonly d: ProbeLoopDeps) {
    this.st = new ProbeState(d.probe, d.initial);
  }

  start(): void {
    this.startedAt = this.d.now();
    this.d.schedule(() => void this.tick(), (this.d.probe.initialDelaySeconds ?? 0) * 1000);
  }

  trigger(): void {
    const delayed = this.d.now() - this.startedAt < (this.d.probe.initialDelaySeconds ?? 0) * 1000;
    if (!this.d.active() || this.inFlight || this.st.result || delayed) return;
    void this.once();
  }

  private async once(): Promise<void> {
    this.inFlight = true;
    try {
      if (this.st.record(await this.d.run())) this.d.onFlip(this.st.result);
    } finally {
      this.inFlight = false;
    }
  }

  private async tick(): Promise<void> {
    if (!this.d.active()) return;
    const startedAt = this.d.now();
    if (!this.inFlight) await this.once();
    this.d.schedule(() => void this.tick(), nextProbeInMs(this.d.probe, startedAt, this.d.now()));
  }
}
