/** krt run | get | list | cancel | logs | session | artifact: Runs and Runtimes through the current kubeconfig. */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parse } from 'yaml';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import { connect, UsageError, type Conn } from '../kube.ts';
import { age, parseFormat, render, table } from '../output.ts';
import { downloadArtifacts, listArtifacts } from './artifacts.ts';
import { followLogs, snapshotLogs } from './logs.ts';
import { attach, SessionEnded, waitReady } from './session.ts';
import { registerInvoke } from './invoke.ts';

const G = '/apis/kruntimes.io/v1alpha1';
type Run = KubeObject & {
  spec: { runtime?: string };
  status?: {
    phase?: string;
    assignedPod?: string;
    message?: string;
    outputs?: Record<string, string>;
    completionTime?: string;
  };
};
interface Global {
  kubeconfig?: string;
  namespace?: string;
  output?: string;
}

const conn = (cmd: Command): Conn => connect(cmd.optsWithGlobals<Global>());

function runsTable(runs: Run[]): string {
  return table(
    ['NAME', 'PHASE', 'RUNTIME', 'POD', 'AGE', 'MESSAGE'],
    runs.map((r) => [
      r.metadata.name ?? '',
      r.status?.phase ?? 'Pending',
      r.spec.runtime ?? '',
      r.status?.assignedPod ?? '',
      age(r.metadata.creationTimestamp),
      (r.status?.message ?? '').slice(0, 80),
    ]),
  );
}

function runtimesTable(
  rts: (KubeObject & { status?: { readyReplicas?: number }; spec: { replicas?: number } })[],
): string {
  return table(
    ['NAME', 'MODE', 'READY', 'AGE'],
    rts.map((r) => [
      r.metadata.name ?? '',
      r.spec.replicas === undefined ? 'DaemonSet' : `Deployment(${r.spec.replicas})`,
      String(r.status?.readyReplicas ?? 0),
      age(r.metadata.creationTimestamp),
    ]),
  );
}

function kindPath(kind: string): { plural: 'runs' | 'runtimes'; table: (o: never[]) => string } {
  if (/^(runs?|rn)$/.test(kind)) return { plural: 'runs', table: runsTable };
  if (/^(runtimes?|rt)$/.test(kind)) return { plural: 'runtimes', table: runtimesTable };
  throw new UsageError(`unknown kind ${JSON.stringify(kind)}: use runs or runtimes`);
}

type RunFlags = {
  file?: string;
  runtime?: string;
  inline?: string;
  script?: string;
  repo?: string;
  commit?: string;
  entrypoint?: string;
  env?: string[];
  timeout?: string;
  name?: string;
  session?: boolean;
  function?: boolean;
  handler?: string;
  inlinePath?: string;
  idleTimeout?: string;
};

/** spec.source from --inline, --script or --repo (a function's inline source gets its inlinePath). */
function sourceFromFlags(o: RunFlags, args: string[]): Record<string, string> | undefined {
  if (o.function && !o.handler)
    throw new UsageError('--function needs --handler (file.function or pkg.module.function)');
  if (o.function && (o.session || args.length)) throw new UsageError('--function takes no command and no --session');
  const inlinePath: Record<string, string> = o.function
    ? { inlinePath: o.inlinePath ?? defaultInlinePath(o.handler ?? '', o.script) }
    : {};
  if (o.inline !== undefined) return { inline: o.inline, ...inlinePath };
  if (o.script) return { inline: readFileSync(o.script, 'utf8'), ...inlinePath };
  if (o.repo) return { repoURL: o.repo, ...(o.commit ? { commitSHA: o.commit } : {}) };
  return undefined;
}

/** Builds a Run from flags, or reads it from -f. */
export function runFromFlags(o: RunFlags, args: string[]): Record<string, unknown> {
  if (o.file) return parse(readFileSync(o.file, 'utf8')) as Record<string, unknown>;
  if (!o.runtime) throw new UsageError('--runtime is required (or give a manifest with -f)');
  const source = sourceFromFlags(o, args);
  if (!source && !args.length && !o.session && !o.function)
    throw new UsageError('give a script: --inline, --script FILE, --repo URL, or a command after -- (or --session)');
  if (o.session && o.entrypoint)
    throw new UsageError(
      '--entrypoint is for task Runs; a session runs the command after -- (default: the Runtime shell)',
    );
  const idle = idleSeconds(o.idleTimeout);
  const env = (o.env ?? []).map((kv) => {
    const i = kv.indexOf('=');
    if (i < 1) throw new UsageError(`--env ${kv}: use KEY=VALUE`);
    return { name: kv.slice(0, i), value: kv.slice(i + 1) };
  });
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: o.name ? { name: o.name } : { generateName: 'run-' },
    spec: {
      runtime: o.runtime,
      ...(source ? { source } : {}),
      ...modeFromFlags(o, args, idle),
      ...(env.length ? { env } : {}),
      ...(o.timeout ? { timeout: o.timeout } : {}),
    },
  };
}

/** Where a function's inline source goes: the handler's module file (`h.f` -> h.sh or h.py, `pkg.mod.f` -> pkg/mod.py). */
export function defaultInlinePath(handler: string, script: string | undefined): string {
  const module = handler.slice(0, Math.max(0, handler.lastIndexOf('.')));
  if (script?.endsWith('.py') || (!script?.endsWith('.sh') && module.includes('.')))
    return `${module.replace(/\./g, '/')}.py`;
  return script?.endsWith('.sh') || !script ? `${module}.sh` : module;
}

function idleSeconds(flag: string | undefined): number | undefined {
  if (flag === undefined) return undefined;
  const n = Number(flag);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--idle-timeout ${flag}: give whole seconds >= 1`);
  return n;
}

function modeFromFlags(
  o: { session?: boolean; entrypoint?: string; function?: boolean; handler?: string },
  args: string[],
  idle: number | undefined,
): { mode?: object } {
  if (o.function)
    return { mode: { function: { handler: o.handler ?? '', ...(idle ? { idleTimeoutSeconds: idle } : {}) } } };
  if (o.session)
    return {
      mode: { session: { ...(args.length ? { command: args } : {}), ...(idle ? { idleTimeoutSeconds: idle } : {}) } },
    };
  if (!args.length && !o.entrypoint) return {};
  return {
    mode: { task: { ...(o.entrypoint ? { entrypoint: o.entrypoint } : {}), ...(args.length ? { args } : {}) } },
  };
}

async function waitTerminal(c: Conn, name: string, progress: boolean): Promise<Run> {
  let last = '';
  for (;;) {
    const r = await c.client.get<Run>(`${G}/namespaces/${c.namespace}/runs/${name}`);
    const p = r.status?.phase ?? 'Pending';
    if (progress && p !== last) {
      process.stderr.write(`run/${name}: ${p}${r.status?.message ? ` (${r.status.message})` : ''}\n`);
      last = p;
    }
    if (isTerminal(p)) return r;
    await new Promise((res) => setTimeout(res, 200));
  }
}

function registerRun(program: Command): void {
  program
    .command('run')
    .description('create a Run from flags or a manifest; optionally wait for it or follow its logs')
    .argument('[command...]', 'command for the Runtime (after --)')
    .option('--name <name>')
    .option('--runtime <runtime>')
    .option('--inline <script>')
    .option('--script <file>')
    .option('--repo <url>')
    .option('--commit <sha>')
    .option('--entrypoint <path>')
    .option('--env <KEY=VALUE...>')
    .option('--timeout <duration>')
    .option('-f, --file <manifest>')
    .option('--session', 'create a session Run (Ready for `krt session`; the command after -- becomes its default)')
    .option('--function', 'create a function Run (Ready for `krt invoke`); needs --handler')
    .option('--handler <handler>', 'function: file.function (bash) or pkg.module.function (python)')
    .option('--inline-path <path>', 'function: where the inline source is written (default: from the handler)')
    .option(
      '--idle-timeout <seconds>',
      'session or function: end after this long without an operation or call (default 600)',
    )
    .option('-w, --wait', 'wait until the Run ends; exit 0 only if it Succeeded')
    .option('--follow', 'follow its logs until it ends (implies --wait)')
    .action(
      async (
        args: string[],
        o: Parameters<typeof runFromFlags>[0] & { wait?: boolean; follow?: boolean },
        cmd: Command,
      ) => {
        const c = conn(cmd);
        const created = await c.client.create<Run>(`${G}/namespaces/${c.namespace}/runs`, runFromFlags(o, args));
        const name = created.metadata.name ?? '';
        process.stderr.write(`run.kruntimes.io/${name} created\n`);
        if (o.follow) await followLogs(c, name, undefined);
        if (!o.wait && !o.follow) return;
        const done = await waitTerminal(c, name, !o.follow);
        const fmt = parseFormat(cmd.optsWithGlobals<Global>().output);
        process.stdout.write(
          render(
            done,
            fmt,
            () => runsTable([done]) + outputsOf(done),
            () => `run.kruntimes.io/${name}`,
          ),
        );
        if (done.status?.phase !== 'Succeeded') process.exitCode = 3;
      },
    );
}

function outputsOf(r: Run): string {
  const o = Object.entries(r.status?.outputs ?? {});
  return o.length ? `outputs:\n${o.map(([k, v]) => `  ${k}=${v}`).join('\n')}\n` : '';
}

function registerGet(program: Command): void {
  for (const verb of ['get', 'list']) {
    program
      .command(verb)
      .description(`${verb} Runs or Runtimes`)
      .argument('<kind>', 'runs | runtimes')
      .argument('[name]')
      .action(async (kind: string, name: string | undefined, _o: unknown, cmd: Command) => {
        const c = conn(cmd);
        const k = kindPath(kind);
        const fmt = parseFormat(cmd.optsWithGlobals<Global>().output);
        if (name) {
          const obj = await c.client.get(`${G}/namespaces/${c.namespace}/${k.plural}/${name}`);
          process.stdout.write(
            render(
              obj,
              fmt,
              () => k.table([obj] as never[]) + (k.plural === 'runs' ? outputsOf(obj as Run) : ''),
              () => `${k.plural}/${name}`,
            ),
          );
          return;
        }
        const list = await c.client.list(`${G}/namespaces/${c.namespace}/${k.plural}`);
        process.stdout.write(
          render(
            list,
            fmt,
            () =>
              list.items.length ? k.table(list.items as never[]) : `No ${k.plural} in namespace ${c.namespace}.\n`,
            () => list.items.map((i) => `${k.plural}/${i.metadata.name}`).join('\n'),
          ),
        );
      });
  }
}

export function registerRuns(program: Command): void {
  registerRun(program);
  registerGet(program);
  registerInvoke(program);
  program
    .command('cancel')
    .description('request cancellation of a Run')
    .argument('<run>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = conn(cmd);
      await c.client.patch(`${G}/namespaces/${c.namespace}/runs/${name}`, { spec: { cancelRequested: true } });
      process.stdout.write(`run.kruntimes.io/${name} cancellation requested\n`);
    });
  program
    .command('logs')
    .description("print a Run's logs (logs.kruntimes.io); -f follows, resuming with the cursor when the stream drops")
    .argument('<run>')
    .option('-f, --follow')
    .option('--tail <n>', 'records to show (default 100, at most 500)')
    .action(async (name: string, o: { follow?: boolean; tail?: string }, cmd: Command) => {
      const c = conn(cmd);
      if (o.follow) await followLogs(c, name, o.tail);
      else await snapshotLogs(c, name, o.tail);
    });
  program
    .command('session')
    .description('run an interactive command on a Ready session Run (sessions.kruntimes.io); exits with its exit code')
    .argument('<run>')
    .argument('[command...]', 'command to run instead of the session default (after --)')
    .option(
      '-t, --tty',
      'run it on a terminal: raw keyboard input, the window size follows yours (stdout and stderr become one stream)',
    )
    .action(async (name: string, command: string[], o: { tty?: boolean }, cmd: Command) => {
      const c = conn(cmd);
      try {
        await waitReady(c, name, process.stderr);
        process.exitCode = await attach(
          c,
          name,
          command,
          { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr },
          o.tty === true,
        );
      } catch (err) {
        if (!(err instanceof SessionEnded)) throw err;
        process.stderr.write(`error: ${err.message}\n`);
        process.exitCode = err.exitCode;
      }
    });
  registerArtifacts(program);
}

/** krt artifact list | download: artifacts.kruntimes.io (get on runs/artifacts is all a caller needs). */
function registerArtifacts(program: Command): void {
  const artifact = program.command('artifact').description('artifacts of a Run (artifacts.kruntimes.io)');
  artifact
    .command('list')
    .argument('<run>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = conn(cmd);
      const refs = await listArtifacts(c, name);
      process.stdout.write(
        render(
          refs,
          parseFormat(cmd.optsWithGlobals<Global>().output),
          () =>
            refs.length
              ? table(
                  ['NAME', 'TYPE', 'SIZE', 'DIGEST'],
                  refs.map((a) => [a.name, a.type, String(a.sizeBytes), a.digest ?? '']),
                )
              : `Run ${name} has no artifacts.\n`,
          () => refs.map((a) => a.name).join('\n'),
        ),
      );
    });
  artifact
    .command('download')
    .description(
      "download a Run's artifacts (all, or the one named) into -o/--output DIR (default .), verifying size and sha256",
    )
    .argument('<run>')
    .argument('[artifact]')
    .option('--extract', 'unpack directory artifacts into DIR/<name>/ instead of saving DIR/<name>.tar.gz')
    .action(async (run: string, name: string | undefined, o: { extract?: boolean }, cmd: Command) => {
      const c = conn(cmd);
      const outDir = cmd.optsWithGlobals<Global>().output ?? '.';
      const done = await downloadArtifacts(c, run, name, { outDir, extract: o.extract === true });
      for (const d of done)
        process.stdout.write(`${d.name} -> ${d.path}${d.extracted ? '/' : ''} (${d.sizeBytes} bytes, ${d.digest})\n`);
    });
}
