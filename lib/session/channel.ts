/**
 * The session wire protocol, the same channel framing as Kubernetes exec/attach
 * (v5.channel.k8s.io): every binary WebSocket message starts with a channel byte.
 *   0 stdin, 1 stdout, 2 stderr, 3 status (metav1.Status JSON, once, at exit),
 *   4 resize ({"Width":n,"Height":n}), 255 close (payload: the channel being closed; 0 = stdin EOF).
 * The client, the extension API server and runtimed relay frames unchanged; only the Runtime
 * Server interprets them. Pure functions, no I/O.
 */
export const PROTOCOL = 'v5.channel.k8s.io';
export const PROTOCOLS = [PROTOCOL, 'v4.channel.k8s.io'];
export const Channel = { Stdin: 0, Stdout: 1, Stderr: 2, Status: 3, Resize: 4, Close: 255 } as const;

export function frame(channel: number, data: Buffer | string = Buffer.alloc(0)): Buffer {
  const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  return Buffer.concat([Buffer.from([channel]), body]);
}

export function parseFrame(msg: Buffer): { channel: number; data: Buffer } | undefined {
  if (msg.length === 0) return undefined;
  return { channel: msg[0] ?? 0, data: msg.subarray(1) };
}

export interface ExitStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: object;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  code?: number;
  details?: { causes: { reason: string; message: string }[] };
}

/** The status frame payload for a process exit (exit code, or a signal as 128+n like a shell). */
export function exitStatus(exitCode: number, message?: string): ExitStatus {
  if (exitCode === 0) return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' };
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    reason: 'NonZeroExitCode',
    message: message ?? `command terminated with non-zero exit code: ${exitCode}`,
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

/** A failure that is not a process exit (the process could not start, the session ended). */
export function errorStatus(reason: string, message: string, code = 500): ExitStatus {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason, message, code };
}

/** Exit code carried by a status frame: 0 on Success, the ExitCode cause, else 1 (the operation failed). */
export function exitCodeOf(status: Partial<ExitStatus>): number {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  const n = cause ? Number(cause.message) : NaN;
  return Number.isInteger(n) && n > 0 && n < 256 ? n : 1;
}

export interface Resize {
  Width: number;
  Height: number;
}
export function parseResize(data: Buffer): Resize | undefined {
  try {
    const r = JSON.parse(data.toString('utf8')) as Partial<Resize>;
    const ok = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n > 0 && n < 10_000;
    return ok(r.Width) && ok(r.Height) ? { Width: r.Width, Height: r.Height } : undefined;
  } catch {
    return undefined;
  }
}

/** The argv of an operation: its command (the caller's, else the session's, as runtimed chose), else the language shell. */
export function sessionArgv(lang: 'bash' | 'python', command: string[]): string[] {
  return command.length ? command : lang === 'python' ? ['python3', '-i', '-u', '-q'] : ['bash'];
}
