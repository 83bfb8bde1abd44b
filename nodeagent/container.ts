/** One container as a host process in a private mount namespace, with CRI-format log files. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const LAUNCHER = join(dirname(fileURLToPath(import.meta.url)), 'launch.sh');

export interface Mount {
  hostPath: string;
  mountPath: string;
  readOnly: boolean;
}

export interface LaunchSpec {
  argv: string[];
  env: Record<string, string>;
  workingDir: string;
  mounts: Mount[];
  logFile: string;
  /** setpriv arguments switching to the container's user (empty: stays root), see security-context.ts. */
  user?: string[];
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: Date;
}

/** Writes "<RFC3339Nano> <stream> F <line>" records, buffering partial lines. */
export class LineLogger {
  private partial: Record<string, string> = {};
  constructor(
    private readonly out: WriteStream,
    private readonly now: () => Date = () => new Date(),
  ) {}

  write(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    const text = (this.partial[stream] ?? '') + chunk.toString('utf8');
    const lines = text.split('\n');
    this.partial[stream] = lines.pop() ?? '';
    for (const line of lines) this.out.write(`${this.now().toISOString()} ${stream} F ${line}\n`);
  }

  flush(): void {
    for (const [stream, rest] of Object.entries(this.partial))
      if (rest) this.out.write(`${this.now().toISOString()} ${stream} F ${rest}\n`);
    this.partial = {};
  }
}

export function mountsEnv(mounts: Mount[]): string {
  for (const m of mounts) {
    if (/[\t\n]/.test(m.hostPath + m.mountPath)) throw new Error(`mount path with tab or newline: ${m.mountPath}`);
    if (!m.mountPath.startsWith('/')) throw new Error(`mountPath must be absolute: ${m.mountPath}`);
  }
  return mounts.map((m) => `${m.hostPath}\t${m.mountPath}\t${m.readOnly ? 'ro' : 'rw'}`).join('\n');
}

export interface Running {
  child: ChildProcess;
  pid: number;
  exited: Promise<Exit>;
}

export function launch(spec: LaunchSpec): Running {
  mkdirSync(dirname(spec.logFile), { recursive: true });
  const out = createWriteStream(spec.logFile, { flags: 'a' });
  const logger = new LineLogger(out);
  const env = {
    ...spec.env,
    KRT_MOUNTS: mountsEnv(spec.mounts),
    // A non-root container gets its own /proc instance with hidepid=invisible: other users'
    // processes (another container's, the node's) are not even listed, as in a PID namespace.
    ...(spec.user?.length ? { KRT_HIDEPID: '1' } : {}),
  };
  // setpriv --pdeathsig: if the node agent dies, the kernel kills the container process instead of
  // leaving an orphan running host process behind (exec keeps the setting through unshare and sh).
  const child = spawn(
    'setpriv',
    [
      '--pdeathsig',
      'KILL',
      '--',
      'unshare',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      LAUNCHER,
      spec.workingDir,
      ...(spec.user ?? []),
      ...spec.argv,
    ],
    {
      detached: true,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.on('data', (c: Buffer) => logger.write('stdout', c));
  child.stderr?.on('data', (c: Buffer) => logger.write('stderr', c));
  const exited = new Promise<Exit>((resolve) => {
    child.on('error', (err) => {
      logger.write('stderr', Buffer.from(`${err.message}\n`));
    });
    child.on('close', (code, signal) => {
      logger.flush();
      out.end(() => resolve({ code, signal, at: new Date() }));
    });
  });
  return { child, pid: child.pid ?? 0, exited };
}

/** Signals the container's whole process group. */
export function signal(r: Running, sig: NodeJS.Signals): void {
  try {
    process.kill(-r.pid, sig);
  } catch {
    try {
      r.child.kill(sig);
    } catch {
      /* gone */
    }
  }
}

/** Kubernetes-style exit code: signal deaths become 128 + signal number. */
export function exitCode(e: Exit): number {
  if (e.code !== null) return e.code;
  const nums: Partial<Record<NodeJS.Signals, number>> = {
    SIGKILL: 9,
    SIGTERM: 15,
    SIGINT: 2,
    SIGHUP: 1,
    SIGSEGV: 11,
    SIGABRT: 6,
  };
  return 128 + (e.signal ? (nums[e.signal] ?? 0) : 0);
}
