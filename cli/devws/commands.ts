/**
 * krt project | workspace | op: developer workspaces (dev.kruntimes.io, ADR 0020). Every lifecycle
 * action creates an Operation and returns at once (the seed's 202); `--wait` and `krt op wait`
 * follow it with one progress line per step and state change.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { Operation, OperationKind, Project, Workspace } from '../../lib/devws/api.ts';
import { connect, UsageError, type Conn } from '../kube.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import { age, parseFormat, render, table } from '../output.ts';

const G = '/apis/dev.kruntimes.io/v1alpha1';
const API = 'dev.kruntimes.io/v1alpha1';
interface Global {
  kubeconfig?: string;
  namespace?: string;
  output?: string;
}
const conn = (cmd: Command): Conn => connect(cmd.optsWithGlobals<Global>());
const path = (c: Conn, plural: string, name = ''): string =>
  `${G}/namespaces/${c.namespace}/${plural}${name ? `/${name}` : ''}`;
const out = (s: string): void => {
  process.stdout.write(s);
};

/** A waited-for Operation that did not succeed: exit code 3 (as a waited-for Run). */
export class OperationFailed extends Error {}

export function projectManifest(name: string, repo: string, branch: string, displayName?: string): Project {
  return {
    apiVersion: API,
    kind: 'Project',
    metadata: { name },
    spec: { repository: { url: repo, defaultBranch: branch }, ...(displayName ? { displayName } : {}) },
  };
}

export function isolatedManifest(name: string, project: string, o: { baseRef?: string; title?: string }): Workspace {
  return {
    apiVersion: API,
    kind: 'Workspace',
    metadata: { name },
    spec: {
      project,
      kind: 'isolated',
      desiredState: 'running',
      ...(o.baseRef !== undefined ? { baseRef: o.baseRef } : {}),
      ...(o.title ? { taskTitle: o.title } : {}),
    },
  };
}

/** A lifecycle Operation of a Workspace (generated name `<workspace>-<kind>-xxxxx`). */
export function operationManifest(kind: OperationKind, ws: Workspace, plugin?: Operation['spec']['plugin']): Operation {
  return {
    apiVersion: API,
    kind: 'Operation',
    metadata: { generateName: `${ws.metadata.name ?? ''}-${kind.replace('_workspace', '').replace('_', '-')}-` },
    spec: { project: ws.spec.project, workspace: ws.metadata.name, kind, ...(plugin ? { plugin } : {}) },
  };
}

/** The plugin instances of a Workspace: name, state, the operation that last changed it, a failed install's message. */
export function pluginRows(w: Workspace): string {
  return table(
    ['PLUGIN', 'STATE', 'OPERATION', 'MESSAGE'],
    (w.status?.plugins ?? []).map((p) => [p.name, p.state, p.operation ?? '', p.message ?? '']),
  );
}

/** A plugin manifest from a file ('-': stdin): JSON, at most 4096 characters (the CRD's limit). */
export function readManifest(text: string, from: string): string {
  if (text.length > 4096) throw new UsageError(`${from}: a plugin manifest has at most 4096 characters`);
  try {
    JSON.parse(text);
  } catch {
    throw new UsageError(`${from}: a plugin manifest is JSON`);
  }
  return text;
}

/** delete_project: no Workspace, the whole Project (admins only: admission answers 403 admin_required). */
export function projectDeleteManifest(project: string): Operation {
  return {
    apiVersion: API,
    kind: 'Operation',
    metadata: { generateName: `${project}-delete-` },
    spec: { project, kind: 'delete_project' },
  };
}

/** `op/<name> <kind>: <state> step <step> (n/m) [reason]`: one line per step or state change. */
export function progressLine(o: Operation): string {
  const s = o.status ?? {};
  const steps = s.steps ?? [];
  const pos = s.step && steps.includes(s.step) ? ` (${steps.indexOf(s.step) + 1}/${steps.length})` : '';
  const why = s.reason ? ` [${s.reason}${s.message ? `: ${s.message}` : ''}]` : '';
  const retry = s.state === 'retry_wait' && s.retryAt ? ` retry at ${s.retryAt}` : '';
  return `op/${o.metadata.name ?? ''} ${o.spec.kind}: ${s.state ?? 'queued'} step ${s.step ?? '-'}${pos}${why}${retry}`;
}

export const FINISHED = ['succeeded', 'failed'];

/** A re-sync request: spec.syncRequests bumped by one (devws-sync takes a new snapshot). */
export function syncRequested(p: Project): Project {
  return { ...p, spec: { ...p.spec, syncRequests: (p.spec.syncRequests ?? 0) + 1 } };
}

/**
 * Where the sync answering `requests` stands: undefined until devws-sync started it, else one
 * line (`p1-sync-2 succeeded snapshot 0123456789ab`) and whether it has ended.
 */
export function syncProgress(p: Project, requests: number): { line: string; ended: boolean } | undefined {
  const sync = p.status?.sync;
  if (!sync || (sync.requestsSeen ?? 0) < requests) return undefined;
  const snapshot = sync.state === 'succeeded' ? ` snapshot ${p.status?.snapshot?.commit.slice(0, 12) ?? ''}` : '';
  return { line: `${sync.operationId ?? ''} ${sync.state}${snapshot}`, ended: sync.state !== 'running' };
}

/** Bumps spec.syncRequests, guarded by resourceVersion (a concurrent write: read again, up to 5 times); the new count. */
async function requestSync(c: Conn, name: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const next = syncRequested(await c.client.get<Project>(path(c, 'projects', name)));
    try {
      await c.client.replace(path(c, 'projects', name), next);
      return next.spec.syncRequests ?? 0;
    } catch (err) {
      if (!isApiError(err, 409) || attempt >= 5) throw err;
    }
  }
}

/** Follows the sync answering `requests` to its end (a failed sync: OperationFailed, exit 3). */
async function waitSync(c: Conn, name: string, requests: number, pollMs = 300): Promise<void> {
  let last = '';
  for (;;) {
    const got = syncProgress(await c.client.get<Project>(path(c, 'projects', name)), requests);
    if (got && got.line !== last) process.stderr.write(`${got.line}\n`);
    last = got?.line ?? last;
    if (got?.ended && /failed$/.test(got.line)) throw new OperationFailed(got.line);
    if (got?.ended) return;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Follows an Operation to its end, one progress line per change; throws OperationFailed unless it succeeded. */
export async function waitOperation(
  c: Conn,
  name: string,
  write: (l: string) => void,
  pollMs = 300,
): Promise<Operation> {
  let last = '';
  for (;;) {
    const o = await c.client.get<Operation>(path(c, 'operations', name));
    const line = progressLine(o);
    if (line !== last) write(`${line}\n`);
    last = line;
    if (o.status?.state === 'failed') throw new OperationFailed(line);
    if (o.status?.state === 'succeeded') return o;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export function workspaceRows(items: Workspace[]): string {
  return table(
    ['NAME', 'PROJECT', 'KIND', 'DESIRED', 'OBSERVED', 'ADMISSION', 'GEN', 'OPERATION', 'STEP', 'AGE'],
    items.map((w) => {
      const s = w.status ?? {};
      return [
        w.metadata.name ?? '',
        w.spec.project,
        w.spec.kind,
        w.spec.desiredState ?? '',
        s.observedState ?? '',
        `${s.admissionOpen ? 'open' : 'closed'}/${s.admissionEpoch ?? 0}`,
        String(s.runtimeGeneration ?? 0),
        s.operation?.name ?? '',
        s.operation?.step ?? '',
        age(w.metadata.creationTimestamp),
      ];
    }),
  );
}

export function operationRows(items: Operation[]): string {
  return table(
    ['NAME', 'KIND', 'WORKSPACE', 'STATE', 'STEP', 'REASON', 'AGE'],
    items.map((o) => [
      o.metadata.name ?? '',
      o.spec.kind,
      o.spec.workspace ?? '',
      o.status?.state ?? 'queued',
      o.status?.step ?? '',
      o.status?.reason ?? '',
      age(o.metadata.creationTimestamp),
    ]),
  );
}

function projectRows(items: Project[]): string {
  return table(
    ['NAME', 'REPOSITORY', 'BRANCH', 'LIFECYCLE', 'SYNC', 'SNAPSHOT', 'AGE'],
    items.map((p) => [
      p.metadata.name ?? '',
      p.spec.repository.url,
      p.spec.repository.defaultBranch,
      p.status?.lifecycle ?? '',
      p.status?.sync?.state ?? '',
      p.status?.snapshot?.commit.slice(0, 12) ?? '',
      age(p.metadata.creationTimestamp),
    ]),
  );
}

/** Prints the created Operation's name, then follows it when asked. */
async function started(c: Conn, op: Operation, wait: boolean | undefined): Promise<void> {
  out(`operation.dev.kruntimes.io/${op.metadata.name ?? ''} created (${op.spec.kind})\n`);
  if (wait) await waitOperation(c, op.metadata.name ?? '', (l) => process.stderr.write(l));
}

/** Waits for an Operation the controller creates itself (a Project's or an isolated Workspace's create). */
async function followCreated(c: Conn, name: string, wait: boolean | undefined): Promise<void> {
  out(`operation ${name} (created by the controller)\n`);
  if (!wait) return;
  for (let i = 0; ; i++) {
    try {
      await c.client.get(path(c, 'operations', name));
      break;
    } catch (err) {
      if (i > 100) throw err;
      await new Promise((r) => setTimeout(r, 300));
    }
  }
  await waitOperation(c, name, (l) => process.stderr.write(l));
}

function listOrGet<T extends Project | Workspace | Operation>(
  group: Command,
  plural: string,
  rows: (items: T[]) => string,
): void {
  group
    .command('list')
    .description(`list ${plural}`)
    .action(async (_o: unknown, cmd: Command) => {
      const c = conn(cmd);
      const l = await c.client.list<T>(path(c, plural));
      const fmt = parseFormat(cmd.optsWithGlobals<Global>().output);
      out(
        render(
          l,
          fmt,
          () => rows(l.items),
          () => l.items.map((x) => x.metadata.name).join('\n'),
        ),
      );
    });
  group
    .command('get')
    .description(`show one of the ${plural}`)
    .argument('<name>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = conn(cmd);
      const obj = await c.client.get<T>(path(c, plural, name));
      const fmt = parseFormat(cmd.optsWithGlobals<Global>().output);
      const line = plural === 'operations' ? `${progressLine(obj as Operation)}\n` : '';
      out(
        render(
          obj,
          fmt,
          () => `${rows([obj])}${line}`,
          () => name,
        ),
      );
    });
}

function registerProject(program: Command): void {
  const project = program.command('project').description('developer workspace Projects (dev.kruntimes.io)');
  project
    .command('create')
    .description('create a Project and its main Workspace (create_project)')
    .argument('<name>')
    .requiredOption('--repo <url>', 'the repository (https or ssh)')
    .option('--branch <branch>', 'the default branch (the only branch synced)', 'main')
    .option('--display-name <text>')
    .option('--wait', 'follow the create_project operation to its end')
    .action(async (name: string, o: { repo: string; branch: string; displayName?: string; wait?: boolean }, cmd) => {
      const c = conn(cmd as Command);
      await c.client.create(path(c, 'projects'), projectManifest(name, o.repo, o.branch, o.displayName));
      out(`project.dev.kruntimes.io/${name} created\n`);
      await followCreated(c, `${name}-create`, o.wait);
    });
  project
    .command('delete')
    .description(
      'delete a Project: every Workspace stopped and its data deleted, then the Project (delete_project; admins only)',
    )
    .argument('<name>')
    .option('--wait', 'follow the delete_project operation to its end')
    .action(async (name: string, o: { wait?: boolean }, cmd: Command) => {
      const c = conn(cmd);
      await started(c, await c.client.create<Operation>(path(c, 'operations'), projectDeleteManifest(name)), o.wait);
    });
  project
    .command('sync')
    .description("sync the Project's repository binding again: a new snapshot of the default branch's tip")
    .argument('<name>')
    .option('--wait', 'follow the sync to its end')
    .action(async (name: string, o: { wait?: boolean }, cmd: Command) => {
      const c = conn(cmd);
      const requests = await requestSync(c, name);
      out(`project.dev.kruntimes.io/${name} sync requested (${requests})\n`);
      if (o.wait) await waitSync(c, name, requests);
    });
  listOrGet<Project>(project, 'projects', projectRows);
}

const LIFECYCLE: [string, OperationKind, string][] = [
  ['start', 'start', 'start a stopped Workspace (no re-clone)'],
  ['stop', 'stop', 'stop a Workspace after its Node proves it is idle (data kept)'],
  ['restart', 'restart', 'stop and start a Workspace on a new sandbox generation'],
  ['delete', 'delete_workspace', 'delete an isolated Workspace and its data'],
];

function registerWorkspace(program: Command): void {
  const ws = program.command('workspace').alias('ws').description('developer Workspaces (dev.kruntimes.io)');
  ws.command('create')
    .description('create an isolated Workspace of a Project (create_workspace)')
    .argument('<name>')
    .requiredOption('--project <project>')
    .option('--base-ref <ref>', "absent, empty, HEAD or the Project's default branch")
    .option('--title <text>', 'the task title')
    .option('--wait', 'follow the create_workspace operation to its end')
    .action(async (name: string, o: { project: string; baseRef?: string; title?: string; wait?: boolean }, cmd) => {
      const c = conn(cmd as Command);
      await c.client.create(path(c, 'workspaces'), isolatedManifest(name, o.project, o));
      out(`workspace.dev.kruntimes.io/${name} created\n`);
      await followCreated(c, `${name}-create`, o.wait);
    });
  for (const [verb, kind, description] of LIFECYCLE) {
    ws.command(verb)
      .description(description)
      .argument('<name>')
      .option('--wait', 'follow the operation to its end')
      .action(async (name: string, o: { wait?: boolean }, cmd: Command) => {
        const c = conn(cmd);
        const w = await c.client.get<Workspace>(path(c, 'workspaces', name));
        await started(c, await c.client.create<Operation>(path(c, 'operations'), operationManifest(kind, w)), o.wait);
      });
  }
  registerPlugin(ws);
  listOrGet<Workspace>(ws, 'workspaces', workspaceRows);
}

/** krt workspace plugin install|remove|list: install_plugin and remove_plugin Operations (plugin → done). */
function registerPlugin(ws: Command): void {
  const pl = ws.command('plugin').description('plugins of a Workspace (install_plugin, remove_plugin)');
  const run = async (
    cmd: Command,
    name: string,
    kind: OperationKind,
    plugin: Operation['spec']['plugin'],
    wait?: boolean,
  ): Promise<void> => {
    const c = conn(cmd);
    const w = await c.client.get<Workspace>(path(c, 'workspaces', name));
    await started(c, await c.client.create<Operation>(path(c, 'operations'), operationManifest(kind, w, plugin)), wait);
  };
  pl.command('install')
    .description(
      "install a plugin into the Workspace's home (~/.krt/plugins/<plugin>); a failed install is recorded on it",
    )
    .argument('<workspace>')
    .argument('<plugin>')
    .requiredOption('--manifest <file>', "the plugin's manifest (JSON; '-' reads stdin)")
    .option('--wait', 'follow the operation to its end')
    .action(async (name: string, plugin: string, o: { manifest: string; wait?: boolean }, cmd: Command) => {
      const text = readFileSync(o.manifest === '-' ? 0 : o.manifest, 'utf8');
      await run(cmd, name, 'install_plugin', { name: plugin, manifest: readManifest(text, o.manifest) }, o.wait);
    });
  pl.command('remove')
    .description('remove a plugin from the Workspace')
    .argument('<workspace>')
    .argument('<plugin>')
    .option('--wait', 'follow the operation to its end')
    .action(async (name: string, plugin: string, o: { wait?: boolean }, cmd: Command) => {
      await run(cmd, name, 'remove_plugin', { name: plugin }, o.wait);
    });
  pl.command('list')
    .description("the Workspace's plugins")
    .argument('<workspace>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = conn(cmd);
      out(pluginRows(await c.client.get<Workspace>(path(c, 'workspaces', name))));
    });
}

function registerOp(program: Command): void {
  const op = program.command('op').description('developer workspace Operations (dev.kruntimes.io)');
  listOrGet<Operation>(op, 'operations', operationRows);
  op.command('wait')
    .description('follow an Operation to its end (exit 0 only if it succeeded, 3 if it failed)')
    .argument('<name>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      await waitOperation(conn(cmd), name, out);
    });
  op.command('retry')
    .description('retry a blocked or retry_wait Operation explicitly')
    .argument('<name>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = conn(cmd);
      const o = await c.client.get<Operation>(path(c, 'operations', name));
      if (o.status?.state !== 'blocked' && o.status?.state !== 'retry_wait')
        throw new UsageError(
          `operation ${name} is ${o.status?.state ?? 'queued'}: only blocked or retry_wait may be retried`,
        );
      const next = (o.spec.retryRequests ?? 0) + 1;
      await c.client.replace(path(c, 'operations', name), { ...o, spec: { ...o.spec, retryRequests: next } });
      out(`operation.dev.kruntimes.io/${name} retry requested (${next})\n`);
    });
}

export function registerDevws(program: Command): void {
  registerProject(program);
  registerWorkspace(program);
  registerOp(program);
}
