/** krt wf create | list | get | delete | trigger | run: Workflows and their WorkflowRuns. */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parse } from 'yaml';
import type { KubeObject } from '../../lib/kube/types.ts';
import { materializeCall, type WorkflowSpec, type WorkflowRunStatus } from '../../lib/workflow/core.ts';
import { connect, UsageError, type Conn } from '../kube.ts';
import { age, parseFormat, render, table } from '../output.ts';

const G = '/apis/kruntimes.io/v1alpha1';
type Wf = KubeObject & { spec: WorkflowSpec; status?: { conditions?: { type: string; status: string }[] } };
type Wfr = KubeObject & { status?: WorkflowRunStatus & { phase?: string } };
interface Global {
  kubeconfig?: string;
  namespace?: string;
  output?: string;
}
const conn = (cmd: Command): Conn => connect(cmd.optsWithGlobals<Global>());

function parseInputs(list: string[] | undefined): Record<string, string> {
  return Object.fromEntries(
    (list ?? []).map((kv) => {
      const i = kv.indexOf('=');
      if (i < 1) throw new UsageError(`--input ${kv}: use NAME=VALUE`);
      return [kv.slice(0, i), kv.slice(i + 1)];
    }),
  );
}

/** Client-side trigger: render the Workflow into an inline WorkflowRun (inputs bound and substituted). */
export function renderRun(wf: Wf, inputs: Record<string, string>, name?: string): Record<string, unknown> {
  const { jobs } = materializeCall(wf.spec, inputs);
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'WorkflowRun',
    metadata: {
      ...(name ? { name } : { generateName: `${wf.metadata.name}-` }),
      labels: { 'workflows.kruntimes.io/workflow': wf.metadata.name ?? '' },
    },
    spec: { jobs },
  };
}

/** First line of `krt wf get/run`: phase, message, and what the run waits for (its job workspace). */
export function summaryLine(name: string, w: Wfr): string {
  const waiting = w.status?.conditions?.find((c) => c.type === 'WaitingForWorkspace' && c.status === 'True');
  const message = w.status?.message ? ` (${w.status.message})` : '';
  return `${name}: ${w.status?.phase ?? 'Pending'}${message}${waiting ? `, ${waiting.message}` : ''}\n`;
}

function jobsTable(w: Wfr): string {
  const rows: string[][] = [];
  for (const [job, j] of Object.entries(w.status?.jobs ?? {}).sort()) {
    rows.push([
      job,
      '',
      j.phase ?? '',
      Object.entries(j.outputs ?? {})
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
      Object.keys(j.artifacts ?? {}).join(' '),
    ]);
    for (const s of j.steps ?? [])
      rows.push([
        `  ${s.name}`,
        s.runName ?? '',
        s.phase ?? '',
        Object.entries(s.outputs ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(' '),
        '',
      ]);
  }
  return table(['JOB/STEP', 'RUN', 'PHASE', 'OUTPUTS', 'ARTIFACTS'], rows);
}

async function watchRun(c: Conn, name: string): Promise<Wfr> {
  let last = '';
  for (;;) {
    const w = await c.client.get<Wfr>(`${G}/namespaces/${c.namespace}/workflowruns/${name}`);
    const line = Object.entries(w.status?.jobs ?? {})
      .map(
        ([j, s]) =>
          `${j}:${s.phase}${s.steps?.length ? `(${s.steps.filter((x) => x.phase === 'Succeeded').length}/${s.steps.length})` : ''}`,
      )
      .join(' ');
    if (line !== last) {
      process.stderr.write(`workflowrun/${name} ${w.status?.phase ?? 'Pending'}  ${line}\n`);
      last = line;
    }
    if (['Succeeded', 'Failed', 'Cancelled'].includes(w.status?.phase ?? '')) return w;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Options of `wf trigger` and `wf run`: `--set` is the upstream Go krt's spelling of `--input`. */
interface TriggerOptions {
  input?: string[];
  set?: string[];
  name?: string;
}

async function trigger(c: Conn, workflow: string, o: TriggerOptions): Promise<string> {
  const wf = await c.client.get<Wf>(`${G}/namespaces/${c.namespace}/workflows/${workflow}`);
  const inputs = parseInputs([...(o.input ?? []), ...(o.set ?? [])]);
  const created = await c.client.create<Wfr>(
    `${G}/namespaces/${c.namespace}/workflowruns`,
    renderRun(wf, inputs, o.name),
  );
  process.stderr.write(`workflowrun.kruntimes.io/${created.metadata.name} created\n`);
  return created.metadata.name ?? '';
}

export function registerWorkflows(program: Command): void {
  const wf = program.command('wf').description('Workflows and WorkflowRuns');
  wf.command('create')
    .description('create or update a Workflow (or Action) from a manifest')
    .requiredOption('-f, --file <manifest>')
    .action(async (o: { file: string }, cmd: Command) => {
      const c = conn(cmd);
      const obj = parse(readFileSync(o.file, 'utf8')) as KubeObject & { kind?: string };
      const plural = obj.kind === 'Action' ? 'actions' : obj.kind === 'Workflow' ? 'workflows' : undefined;
      if (!plural) throw new UsageError(`${o.file}: expected kind Workflow or Action, got ${String(obj.kind)}`);
      await c.client.apply(`${G}/namespaces/${c.namespace}/${plural}/${obj.metadata.name}`, obj, 'krt');
      process.stdout.write(
        `${plural === 'actions' ? 'action' : 'workflow'}.kruntimes.io/${obj.metadata.name} applied\n`,
      );
    });
  wf.command('list')
    .description('list Workflows')
    .action(async (_o: unknown, cmd: Command) => {
      const c = conn(cmd);
      const l = await c.client.list<Wf>(`${G}/namespaces/${c.namespace}/workflows`);
      process.stdout.write(
        render(
          l,
          parseFormat(cmd.optsWithGlobals<Global>().output),
          () =>
            table(
              ['NAME', 'READY', 'JOBS', 'AGE'],
              l.items.map((w) => [
                w.metadata.name ?? '',
                w.status?.conditions?.find((x) => x.type === 'Ready')?.status ?? '',
                Object.keys(w.spec.jobs).join(','),
                age(w.metadata.creationTimestamp),
              ]),
            ),
          () => l.items.map((w) => `workflow/${w.metadata.name}`).join('\n'),
        ),
      );
    });
  registerRunCommands(wf);
}

/** `wf get|delete|trigger|run`: WorkflowRuns (and `get --workflow`). */
function registerRunCommands(wf: Command): void {
  wf.command('get')
    .description('show a WorkflowRun (jobs, steps, outputs, artifacts) or a Workflow')
    .argument('<name>')
    .option('--workflow', 'get the Workflow definition')
    .action(async (name: string, o: { workflow?: boolean }, cmd: Command) => {
      const c = conn(cmd);
      const obj = await c.client.get<Wfr>(
        `${G}/namespaces/${c.namespace}/${o.workflow ? 'workflows' : 'workflowruns'}/${name}`,
      );
      process.stdout.write(
        render(
          obj,
          parseFormat(cmd.optsWithGlobals<Global>().output),
          () => (o.workflow ? `${name}\n` : `${summaryLine(name, obj)}${jobsTable(obj)}`),
          () => name,
        ),
      );
    });
  wf.command('delete')
    .description('delete a Workflow')
    .argument('<name>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = conn(cmd);
      await c.client.delete(`${G}/namespaces/${c.namespace}/workflows/${name}`);
      process.stdout.write(`workflow.kruntimes.io/${name} deleted\n`);
    });
  wf.command('trigger')
    .description('start a WorkflowRun of a Workflow')
    .argument('<workflow>')
    .option('--input <NAME=VALUE...>', 'a workflow_dispatch input (repeatable)')
    .option('--set <NAME=VALUE...>', 'the same as --input (the upstream krt flag)')
    .option('--name <name>')
    .action(async (workflow: string, o: TriggerOptions, cmd: Command) => {
      process.stdout.write(`${await trigger(conn(cmd), workflow, o)}\n`);
    });
  wf.command('run')
    .description('trigger a Workflow and follow it to the end (exit 0 only if it Succeeded)')
    .argument('<workflow>')
    .option('--input <NAME=VALUE...>', 'a workflow_dispatch input (repeatable)')
    .option('--set <NAME=VALUE...>', 'the same as --input (the upstream krt flag)')
    .option('--name <name>')
    .action(async (workflow: string, o: TriggerOptions, cmd: Command) => {
      const c = conn(cmd);
      const name = await trigger(c, workflow, o);
      const done = await watchRun(c, name);
      process.stdout.write(
        `${name}: ${done.status?.phase}${done.status?.message ? ` (${done.status.message})` : ''}\n${jobsTable(done)}`,
      );
      if (done.status?.phase !== 'Succeeded') process.exitCode = 3;
    });
}
