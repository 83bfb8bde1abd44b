/**
 * Executions of a Runtime Server: processes in their own process group, output kept as
 * numbered line records (bounded per stream), retained after exit until forgotten, so a
 * restarted runtimed can re-attach and read from any record number.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { chooseCommand, type ExecRequest, type Language } from './command.ts';

export type State = 'RUNNING' | 'SUCCEEDED' | 'FAILED';
export interface OutputRecord {
  seq: number;
  stream: 'stdout' | 'stderr';
  line: string;
  time: string;
}
export interface Summary {
  id: string;
  state: State;
  exitCode: number;
  errorMessage: string;
  startedAt: string;
  finishedAt?: string;
  records: number;
}

/** Output bytes kept per stream; each record is charged at least MIN_RECORD_COST bytes against it. */
export const STREAM_LIMIT = 1 << 20;
/**
 * Each line becomes a record in memory and a JSON log record of about 250 bytes on runtimed's
 * stdout, so blank or tiny lines are charged as if they were this long: at most
 * STREAM_LIMIT / MIN_RECORD_COST records per stream (65536), whatever the output. A megabyte of
 * blank lines thus makes at most ~16 MiB of log records instead of ~250 MiB, while 60000 short
 * lines ("fast 12345") still fit.
 */
export const MIN_RECORD_COST = 16;
export const TRUNCATED = '[output truncated]';

export class Execution extends EventEmitter {
  state: State = 'RUNNING';
  exitCode = 0;
  errorMessage = '';
  readonly records: OutputRecord[] = [];
  readonly startedAt = new Date().toISOString();
  finishedAt?: string;
  private child?: ChildProcess;
  private bytes = { stdout: 0, stderr: 0 };
  private partial = { stdout: '', stderr: '' };
  private timer?: NodeJS.Timeout;
  private ended = false;

  constructor(readonly id: string) {
    super();
    this.setMaxListeners(0);
  }

  summary(): Summary {
    return {
      id: this.id,
      state: this.state,
      exitCode: this.exitCode,
      errorMessage: this.errorMessage,
      startedAt: this.startedAt,
      ...(this.finishedAt ? { finishedAt: this.finishedAt } : {}),
      records: this.records.length,
    };
  }

  start(lang: Language, req: ExecRequest, baseEnv: NodeJS.ProcessEnv): void {
    const cmd = chooseCommand(lang, req);
    if (!cmd.ok) {
      this.finish('FAILED', -1, cmd.message);
      return;
    }
    const [bin, ...argv] = cmd.argv;
    const child = spawn(bin ?? 'false', argv, {
      cwd: req.workingDir,
      env: { ...req.env, ...baseEnv },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout?.on('data', (c: Buffer) => this.output('stdout', c));
    child.stderr?.on('data', (c: Buffer) => this.output('stderr', c));
    child.on('error', (err) => {
      this.output('stderr', Buffer.from(`${err.message}\n`));
    });
    child.on('close', (code, signal) => {
      if (this.state !== 'RUNNING') return;
      const exit = code ?? (signal ? 128 + (signal === 'SIGKILL' ? 9 : 15) : 1);
      this.finish(exit === 0 ? 'SUCCEEDED' : 'FAILED', exit, exit === 0 ? '' : `exit status ${exit}`);
    });
    if (req.timeoutSeconds && req.timeoutSeconds > 0)
      this.timer = setTimeout(() => this.kill('timeout'), req.timeoutSeconds * 1000);
  }

  private output(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    if (this.bytes[stream] >= STREAM_LIMIT) return;
    const lines = (this.partial[stream] + chunk.toString('utf8')).split('\n');
    this.partial[stream] = lines.pop() ?? '';
    for (const line of lines) {
      this.bytes[stream] += Math.max(Buffer.byteLength(line) + 1, MIN_RECORD_COST);
      if (this.bytes[stream] > STREAM_LIMIT) break;
      this.push(stream, line.replace(/\r$/, ''));
    }
    // A line without its newline yet counts too, so one endless line is bounded as well.
    if (this.bytes[stream] + Buffer.byteLength(this.partial[stream]) >= STREAM_LIMIT) this.truncate(stream);
  }

  private truncate(stream: 'stdout' | 'stderr'): void {
    this.bytes[stream] = STREAM_LIMIT;
    this.partial[stream] = '';
    this.push(stream, TRUNCATED);
  }

  private push(stream: 'stdout' | 'stderr', line: string): void {
    const rec = { seq: this.records.length, stream, line, time: new Date().toISOString() };
    this.records.push(rec);
    this.emit('record', rec);
  }

  private finish(state: State, exitCode: number, message: string): void {
    if (this.ended) return;
    this.ended = true;
    if (this.timer) clearTimeout(this.timer);
    for (const s of ['stdout', 'stderr'] as const)
      if (this.partial[s]) {
        this.push(s, this.partial[s]);
        this.partial[s] = '';
      }
    this.state = state;
    this.exitCode = exitCode;
    this.errorMessage = message;
    this.finishedAt = new Date().toISOString();
    this.emit('end', this.summary());
  }

  /** SIGTERM the process group, SIGKILL after 2 s; the execution FAILS with exit -1 and the reason.
   * 'fenced' (the execution lease lapsed) and 'shutdown' (the Runtime Server itself stops: its
   * container is being stopped) SIGKILL at once: nothing may run past the lease or the server. */
  kill(reason: 'timeout' | 'cancelled' | 'fenced' | 'shutdown'): void {
    if (this.state !== 'RUNNING') return;
    const pid = this.child?.pid;
    const sig = (s: NodeJS.Signals): void => {
      try {
        if (pid) process.kill(-pid, s);
      } catch {
        /* gone */
      }
    };
    if (reason === 'fenced' || reason === 'shutdown') sig('SIGKILL');
    else {
      sig('SIGTERM');
      setTimeout(() => sig('SIGKILL'), 2000).unref();
    }
    this.finish('FAILED', -1, reason);
  }
}

export class Executions {
  private readonly all = new Map<string, Execution>();
  constructor(
    private readonly lang: Language,
    private readonly baseEnv: NodeJS.ProcessEnv,
  ) {}

  get(id: string): Execution | undefined {
    return this.all.get(id);
  }
  list(): Summary[] {
    return [...this.all.values()].map((e) => e.summary());
  }

  /** Starts an execution; an existing running one with the same id is kept (idempotent). */
  execute(req: ExecRequest): { execution: Execution; created: boolean } {
    const existing = this.all.get(req.id);
    if (existing && existing.state === 'RUNNING') return { execution: existing, created: false };
    const e = new Execution(req.id);
    this.all.set(req.id, e);
    e.start(this.lang, req, this.baseEnv);
    return { execution: e, created: true };
  }

  /** The execution lease lapsed ('fenced') or the Runtime Server stops ('shutdown'): kill every
   * running execution (SIGKILL); returns their ids. */
  fence(reason: 'fenced' | 'shutdown' = 'fenced'): string[] {
    const killed = [...this.all.values()].filter((e) => e.state === 'RUNNING');
    for (const e of killed) e.kill(reason);
    return killed.map((e) => e.id);
  }

  forget(id: string): 'ok' | 'running' | 'unknown' {
    const e = this.all.get(id);
    if (!e) return 'unknown';
    if (e.state === 'RUNNING') return 'running';
    this.all.delete(id);
    return 'ok';
  }
}
