/**
 * krt session <run> [-- command...]: one interactive operation on a Ready session Run through
 * sessions.kruntimes.io (current kubeconfig only). stdin is sent as it arrives and closed at
 * EOF; stdout and stderr are written as they come; krt exits with the operation's exit code.
 */
import type { Readable, Writable } from 'node:stream';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import { Channel, exitCodeOf, frame, parseFrame, PROTOCOLS, type ExitStatus } from '../../lib/session/channel.ts';
import type { Conn } from '../kube.ts';

type Run = KubeObject & { spec: { mode?: { session?: object } }; status?: { phase?: string; message?: string } };

export class SessionEnded extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** Waits until the session Run is Ready (progress on stderr); throws when it is not a session or has ended. */
export async function waitReady(c: Conn, name: string, progress: Writable): Promise<void> {
  let last = '';
  for (;;) {
    const r = await c.client.get<Run>(`/apis/kruntimes.io/v1alpha1/namespaces/${c.namespace}/runs/${name}`);
    if (!r.spec.mode?.session)
      throw new SessionEnded(
        `Run ${name} is not a session Run (create one with: krt run --session --runtime <runtime>)`,
        2,
      );
    const p = r.status?.phase ?? 'Pending';
    if (p === 'Ready') return;
    if (isTerminal(p))
      throw new SessionEnded(
        `the session of Run ${name} has ended: ${p}${r.status?.message ? ` (${r.status.message})` : ''}`,
        3,
      );
    if (p !== last) {
      progress.write(`run/${name}: ${p}, waiting for the session to be Ready\n`);
      last = p;
    }
    await new Promise((res) => setTimeout(res, 200));
  }
}

export interface Stdio {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

/** Runs one operation and resolves with its exit code. With tty, the local terminal is put in raw mode and its size follows. */
export async function attach(c: Conn, name: string, command: string[], io: Stdio, tty = false): Promise<number> {
  const path = `/apis/sessions.kruntimes.io/v1alpha1/namespaces/${c.namespace}/runs/${name}/session`;
  const ws = await c.client.websocket(path, PROTOCOLS, [
    ...command.map((a): [string, string] => ['command', a]),
    ...(tty ? [['tty', 'true'] as [string, string]] : []),
  ]);
  const term = tty
    ? terminal(io, (size) => {
        if (ws.readyState === ws.OPEN) ws.send(frame(Channel.Resize, JSON.stringify(size)));
      })
    : undefined;
  return new Promise((resolve) => {
    let status: Partial<ExitStatus> | undefined;
    const onData = (d: Buffer | string): void => {
      ws.send(frame(Channel.Stdin, typeof d === 'string' ? Buffer.from(d) : d));
    };
    const onEnd = (): void => {
      if (ws.readyState === ws.OPEN) ws.send(Buffer.from([Channel.Close, Channel.Stdin]));
    };
    io.stdin.on('data', onData);
    io.stdin.once('end', onEnd);
    ws.on('message', (m: Buffer) => {
      const f = parseFrame(m);
      if (!f) return;
      if (f.channel === Channel.Stdout) io.stdout.write(f.data);
      else if (f.channel === Channel.Stderr) io.stderr.write(f.data);
      else if (f.channel === Channel.Status) {
        try {
          status = JSON.parse(f.data.toString('utf8')) as Partial<ExitStatus>;
        } catch {
          status = { status: 'Failure', message: 'unreadable exit status' };
        }
      }
    });
    ws.once('close', (code, reason) => {
      term?.restore();
      io.stdin.off('data', onData);
      io.stdin.off('end', onEnd);
      io.stdin.pause();
      if (!status) {
        io.stderr.write(
          `krt: the session connection closed without an exit status (${code}${reason.length ? ` ${reason.toString()}` : ''})\n`,
        );
        resolve(1);
        return;
      }
      if (status.status !== 'Success' && status.reason !== 'NonZeroExitCode' && status.message)
        io.stderr.write(`krt: ${status.message}\n`);
      resolve(exitCodeOf(status));
    });
  });
}

/** Raw mode on a local terminal and its size (now and on every change) sent as resize frames. */
function terminal(io: Stdio, send: (size: { Width: number; Height: number }) => void): { restore: () => void } {
  const stdin = io.stdin as Readable & { isTTY?: boolean; setRawMode?: (raw: boolean) => void };
  const stdout = io.stdout as Writable & {
    isTTY?: boolean;
    columns?: number;
    rows?: number;
    on: Writable['on'];
    off: Writable['off'];
  };
  const raw = stdin.isTTY === true && typeof stdin.setRawMode === 'function';
  if (raw) stdin.setRawMode?.(true);
  const report = (): void => {
    if (stdout.isTTY && stdout.columns && stdout.rows) send({ Width: stdout.columns, Height: stdout.rows });
  };
  report();
  stdout.on('resize', report);
  return {
    restore: () => {
      stdout.off('resize', report);
      if (raw) stdin.setRawMode?.(false);
    },
  };
}
