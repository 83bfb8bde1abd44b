/**
 * Session operations of the Runtime Server: runtimed opens a WebSocket on the Unix socket
 * (GET /v1/sessions, spec in the X-Kruntimes-Session header as base64 JSON) and the server runs
 * one interactive process in its own process group, relaying channel frames
 * (lib/session/channel.ts): stdin in, stdout/stderr out, and the exit status last. With `tty`
 * the process runs on a pseudo-terminal (pty-bridge.py) and resize frames resize it. Closing the
 * socket kills the process group, so no operation outlives its connection.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import type { Duplex, Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { WebSocket, WebSocketServer } from 'ws';
import { refuseUpgrade } from '../../lib/http/upgrade-refusal.ts';
import {
  Channel,
  errorStatus,
  exitStatus,
  frame,
  parseFrame,
  parseResize,
  sessionArgv,
} from '../../lib/session/channel.ts';
import { withNorc, type Language } from './command.ts';

export const SESSION_HEADER = 'x-kruntimes-session';
/** Output bytes an operation may have waiting for its client before the process is paused. */
export const OUTPUT_HIGH_WATER = 1 << 20;
export interface SessionSpec {
  id: string;
  command: string[];
  workingDir: string;
  env: Record<string, string>;
  /** Run the command on a pseudo-terminal (stdout and stderr become one stream). */ tty?: boolean;
}

/** The bridge that gives an operation a pseudo-terminal (Node has no pty API without a native addon). */
export const PTY_BRIDGE = fileURLToPath(new URL('./pty-bridge.py', import.meta.url));

export function parseSessionSpec(raw: string | undefined): SessionSpec | string {
  if (!raw) return 'missing session spec';
  try {
    const s = JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) as Partial<SessionSpec>;
    if (!s.id || !s.workingDir) return 'session spec needs id and workingDir';
    if (!Array.isArray(s.command) || !s.command.every((c) => typeof c === 'string'))
      return 'session command must be a list of strings';
    return {
      id: s.id,
      command: s.command,
      workingDir: s.workingDir,
      env: s.env ?? {},
      ...(s.tty === true ? { tty: true } : {}),
    };
  } catch {
    return 'session spec is not base64 JSON';
  }
}

/** Why a new session operation may not start: the execution lease lapsed (ADR 0011). */
export const FENCED_MESSAGE = 'fenced: the execution lease lapsed; runtimed must renew it first';

export class SessionOperations {
  /** ws loads with the first session operation: most Runtime Pods never serve one (about 4 MiB). */
  private wss: Promise<WebSocketServer> | undefined;
  private readonly active = new Set<() => void>();
  /**
   * @param fenced whether the execution lease has lapsed: session operations are fenced like
   * task executions, so a runtimed cut off from the API server stops serving sessions too.
   */
  constructor(
    private readonly lang: Language,
    private readonly baseEnv: NodeJS.ProcessEnv,
    private readonly fenced: () => boolean = () => false,
  ) {}

  /** Operations running now. */
  get running(): number {
    return this.active.size;
  }

  /** Ends every operation at once (SIGKILL, a Fenced status); returns how many were running. */
  fence(): number {
    const all = [...this.active];
    for (const f of all) f();
    return all.length;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.fenced()) {
      refuseUpgrade(socket, 503, 'Fenced', FENCED_MESSAGE);
      return;
    }
    const spec = parseSessionSpec(req.headers[SESSION_HEADER] as string | undefined);
    if (typeof spec === 'string') {
      refuseUpgrade(socket, 400, 'BadRequest', spec);
      return;
    }
    // Until ws takes the socket, what the client sends after the request waits in its buffer.
    this.server().then(
      (wss) =>
        wss.handleUpgrade(req, socket, head, (ws) => {
          this.run(ws, spec);
        }),
      (err: unknown) => socket.destroy(err as Error),
    );
  }

  private server(): Promise<WebSocketServer> {
    this.wss ??= import('../../lib/session/frames.ts').then((m) => m.sessionWebSocketServer());
    return this.wss;
  }

  private run(ws: WebSocket, spec: SessionSpec): void {
    const argv = sessionArgv(this.lang, spec.command);
    // stdin is a socketpair (libuv): `bash -c` at SHLVL 0 would take that for rshd and source
    // ~/.bashrc, so bash gets --norc (and SHLVL 1, for the shells it starts). On a terminal, bash
    // is an interactive shell, which reads ~/.bashrc as in any terminal.
    const [bin, ...args] = spec.tty ? ['python3', PTY_BRIDGE, ...argv] : withNorc(argv);
    const child = spawn(bin ?? 'false', args, {
      cwd: spec.workingDir,
      env: { SHLVL: '1', ...spec.env, ...this.baseEnv },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    const resize = child.stdio[3] as Writable | null;
    resize?.on('error', () => undefined);
    let ended = false;
    const send = (b: Buffer): void => {
      if (ws.readyState === ws.OPEN) ws.send(b);
    };
    const end = (status: object): void => {
      if (ended) return;
      ended = true;
      send(frame(Channel.Status, JSON.stringify(status)));
      ws.close(1000);
    };
    const kill = (): void => killGroup(child.pid);
    const fence = (): void => {
      killGroup(child.pid, 'SIGKILL');
      end(errorStatus('Fenced', FENCED_MESSAGE, 503));
    };
    this.active.add(fence);
    const out = flowControlled(ws, child);
    child.stdout.on('data', out(Channel.Stdout));
    child.stderr.on('data', out(Channel.Stderr));
    child.stdin.on('error', () => undefined);
    child.on('error', (err) =>
      end(
        errorStatus(
          'StartFailed',
          spec.tty
            ? `a terminal (tty) needs python3 in the Runtime image: ${err.message}`
            : `starting ${JSON.stringify(bin)} failed: ${err.message}`,
        ),
      ),
    );
    child.on('close', (code, signal) => {
      const exit = code ?? (signal === 'SIGKILL' ? 137 : signal ? 143 : 1);
      end(exitStatus(exit));
    });
    ws.on('message', input(child, spec, resize));
    // A protocol error (e.g. a frame over MAX_FRAME_BYTES) closes the operation; without a listener it would crash the server.
    ws.on('error', () => ws.terminate());
    ws.on('close', () => {
      ended = true;
      this.active.delete(fence);
      kill();
    });
  }
}

/** The client's frames: stdin, its close, and terminal resizes. */
function input(
  child: ChildProcess & { stdin: Writable },
  spec: SessionSpec,
  resize: Writable | null | undefined,
): (msg: Buffer, isBinary: boolean) => void {
  return (msg, isBinary) => {
    const f = parseFrame(isBinary ? msg : Buffer.from(msg));
    if (!f) return;
    if (f.channel === Channel.Stdin) child.stdin.write(f.data);
    else if (f.channel === Channel.Close && f.data[0] === Channel.Stdin) child.stdin.end();
    else if (f.channel === Channel.Resize) {
      const size = parseResize(f.data);
      if (size && spec.tty) resize?.write(`${JSON.stringify(size)}\n`); // without a terminal there is nothing to resize
    }
  };
}

/** SIGTERM to the operation's process group, SIGKILL 2 s later if it is still there (or SIGKILL at once). */
function killGroup(pid: number | undefined, first: NodeJS.Signals = 'SIGTERM'): void {
  const sig = (s: NodeJS.Signals): void => {
    try {
      if (pid) process.kill(-pid, s);
    } catch {
      /* gone */
    }
  };
  sig(first);
  if (first !== 'SIGKILL') setTimeout(() => sig('SIGKILL'), 2000).unref();
}

/**
 * Frames a process's output for one channel, with flow control: stops reading the process's
 * stdout and stderr while more than OUTPUT_HIGH_WATER bytes wait for the client.
 */
function flowControlled(
  ws: WebSocket,
  child: { stdout: Readable; stderr: Readable },
): (channel: number) => (c: Buffer) => void {
  let queued = 0;
  return (channel) => (c) => {
    if (ws.readyState !== ws.OPEN) return;
    const f = frame(channel, c);
    queued += f.length;
    ws.send(f, () => {
      queued -= f.length;
      if (queued <= OUTPUT_HIGH_WATER / 2 && child.stdout.isPaused()) {
        child.stdout.resume();
        child.stderr.resume();
      }
    });
    if (queued > OUTPUT_HIGH_WATER) {
      child.stdout.pause();
      child.stderr.pause();
    }
  };
}
