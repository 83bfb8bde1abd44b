/**
 * The runtimed end of the Runtime Server channel (issue 11 d). runtimed listens on a Unix socket
 * in a directory only it can write (the `kruntimes-socket` emptyDir, mounted read-only into the
 * runtime container) and the Runtime Server dials in, keeping a few idle connections ready;
 * runtimed then speaks HTTP over them as a client. A Run can neither replace nor plant the
 * socket, and runtimed never follows a path a Run controls to reach its Runtime Server.
 */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';

export type Oncreate = (err: Error | null, stream: Duplex) => void;

export class DialIn {
  private idle: Socket[] = [];
  private waiters: { resolve: (s: Socket) => void; timer: NodeJS.Timeout }[] = [];
  private server: Server | undefined;

  constructor(
    readonly path: string,
    private readonly waitMs = 10_000,
  ) {}

  /** Listens; the socket is group-writable for the runtime container (the Pod's fsGroup). */
  async listen(): Promise<void> {
    mkdirSync(dirname(this.path), { recursive: true });
    rmSync(this.path, { force: true });
    const srv = createServer((s) => this.offer(s));
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(this.path, () => resolve());
    });
    chmodSync(this.path, 0o660);
    this.server = srv;
  }

  /** Connections waiting to be used. */
  get ready(): number {
    return this.idle.length;
  }

  private offer(s: Socket): void {
    s.on('error', () => undefined);
    const w = this.waiters.shift();
    if (w) {
      clearTimeout(w.timer);
      w.resolve(s);
      return;
    }
    this.idle.push(s);
    s.once('close', () => {
      this.idle = this.idle.filter((x) => x !== s);
    });
  }

  /** An idle connection from the Runtime Server, waiting up to waitMs for one to arrive. */
  take(): Promise<Socket> {
    for (let s = this.idle.shift(); s; s = this.idle.shift()) if (!s.destroyed) return Promise.resolve(s);
    return new Promise((resolve, reject) => {
      const w = {
        resolve,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          reject(new Error(`the Runtime Server has not connected to ${this.path}`));
        }, this.waitMs),
      };
      this.waiters.push(w);
    });
  }

  /** An http.request/ws `createConnection` that uses a dialled-in connection. */
  readonly createConnection = (_opts: unknown, oncreate?: Oncreate): undefined => {
    this.take().then(
      (s) => oncreate?.(null, s),
      (err: Error) => oncreate?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  };

  /** A keep-alive agent over dialled-in connections. */
  agent(): http.Agent {
    const connect = this.createConnection;
    class DialInAgent extends http.Agent {
      override createConnection(opts: unknown, oncreate?: Oncreate): undefined {
        return connect(opts, oncreate);
      }
    }
    return new DialInAgent({ keepAlive: true, maxSockets: 256 });
  }

  close(): void {
    this.server?.close();
    for (const s of this.idle) s.destroy();
    this.idle = [];
  }
}
