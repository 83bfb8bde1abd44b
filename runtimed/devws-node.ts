/**
 * `kruntimes devws-node`: the Node agent of a developer workspace's sandbox Pod (ADR 0020). It
 * holds only its Pod-bound token of the namespaced ServiceAccount kruntimes-devws-node (get/patch
 * Workspaces, get Operations, narrowed by devws-admission to its own report) and polls its
 * Workspace: it clones the frozen snapshot when dispatched, installs or removes the plugins of a
 * plugin step (lib/devws/node-agent-plugins.ts), gives idle proofs while the Workspace
 * quiesces, and renews its heartbeat. A journal on the data volume makes a clone that was started
 * by an earlier incarnation and never finished report `unknown` instead of running again.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { Operation, Workspace } from '../lib/devws/api.ts';
import {
  NODE_REPORT,
  cloneMessage,
  readNodeReport,
  type CloneReport,
  type NodeReportDoc,
} from '../lib/devws/node-report.ts';
import { gitProcessEnv } from './source.ts';
import { GIT_TOKEN_FILE } from '../lib/devws/git-access.ts';
import { decideNode, type JournalEntry, type NodeAction, type NodeSelf } from '../lib/devws/node-agent.ts';
import { runPluginItem } from '../lib/devws/node-agent-plugins.ts';

export interface NodeConfig {
  namespace: string;
  workspace: string;
  self: NodeSelf;
  home: string;
  /** The Git Server's CA when the Operation carries none (KRT_GIT_CA; the substrates set none). */
  gitCA?: string;
  /** The Git-audience token the Node presents to the Git Server (its projected token, re-read per clone). */
  gitTokenFile?: string;
  pollMs: number;
}

export function loadNodeConfig(env: NodeJS.ProcessEnv): NodeConfig {
  const need = (k: string): string => {
    const v = env[k];
    if (!v) throw new Error(`devws-node: environment variable ${k} is required`);
    return v;
  };
  const generation = Number(need('KRT_GENERATION'));
  if (!Number.isInteger(generation) || generation < 1) throw new Error('devws-node: KRT_GENERATION must be >= 1');
  return {
    namespace: need('POD_NAMESPACE'),
    workspace: need('KRT_WORKSPACE'),
    self: { nodeId: need('KRT_NODE_ID'), incarnation: randomUUID(), sandboxId: need('POD_NAME'), generation },
    home: need('HOME'),
    ...(env.KRT_GIT_CA ? { gitCA: env.KRT_GIT_CA } : {}),
    gitTokenFile: env.KRT_GIT_TOKEN_FILE ?? join(SA_TOKEN_DIR, GIT_TOKEN_FILE),
    pollMs: Number(env.KRT_NODE_POLL_MS ?? '1000'),
  };
}

const stateDir = (cfg: NodeConfig): string => join(cfg.home, '.krt-node');
const SA_TOKEN_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * git's environment for the clone: the Git Server's CA, and its credential as configuration in
 * the environment (GIT_CONFIG_*), never in the URL, the command line, .git/config or a log;
 * scoped to the repository URL, and no redirect is followed (it would carry the header elsewhere).
 * The CA is the one the Operation carries at this attempt (`ca`: a rotated CA is trusted without a
 * restart of the Node), else the Node's own configuration.
 */
export function cloneEnv(cfg: NodeConfig, repositoryUrl: string, ca = cfg.gitCA): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...gitProcessEnv(process.env), GIT_TERMINAL_PROMPT: '0' };
  if (ca) {
    const file = join(stateDir(cfg), 'git-ca.pem');
    mkdirSync(stateDir(cfg), { recursive: true, mode: 0o700 });
    writeFileSync(file, ca);
    env.GIT_SSL_CAINFO = file;
  }
  const config: [string, string][] = [['http.followRedirects', 'false']];
  const token = readToken(cfg.gitTokenFile);
  if (token) config.push([`http.${repositoryUrl}.extraHeader`, `Authorization: Bearer ${token}`]);
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([k, v], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = k;
    env[`GIT_CONFIG_VALUE_${i}`] = v;
  });
  return env;
}

function readToken(file: string | undefined): string {
  try {
    return file ? readFileSync(file, 'utf8').trim() : '';
  } catch {
    return '';
  }
}

const journalFile = (cfg: NodeConfig, op: string, attempt: number): string =>
  join(stateDir(cfg), 'clone', `${op}-${attempt}.json`);

export function readJournal(cfg: NodeConfig, op: string, attempt: number): JournalEntry {
  try {
    return JSON.parse(readFileSync(journalFile(cfg, op, attempt), 'utf8')) as JournalEntry;
  } catch {
    return { state: 'none' };
  }
}

function writeJournal(cfg: NodeConfig, op: string, attempt: number, e: JournalEntry): void {
  mkdirSync(join(stateDir(cfg), 'clone'), { recursive: true, mode: 0o700 });
  const f = journalFile(cfg, op, attempt);
  writeFileSync(`${f}.tmp`, JSON.stringify(e));
  renameSync(`${f}.tmp`, f);
}

/** Anything under ~/.krt/activity (an agent session or execution holds an entry while it runs) makes the Node busy. */
export function isBusy(home: string): boolean {
  try {
    return readdirSync(join(home, '.krt', 'activity')).length > 0;
  } catch {
    return false;
  }
}

function git(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, timeout: 120_000, maxBuffer: 1024 * 1024, env }, (err, stdout, stderr) => {
      if (err) reject(new Error(`git ${args[0] ?? ''}: ${String(stderr).trim().slice(-512) || err.message}`));
      else resolve(String(stdout).trim());
    });
  });
}

/** Clones the frozen snapshot into ~/src from scratch; the local branch tracks the Workspace branch. */
export async function runClone(cfg: NodeConfig, a: Extract<NodeAction, { kind: 'clone' }>): Promise<CloneReport> {
  const { input } = a;
  if (!/^https:\/\/[^\s]+$/.test(input.repositoryUrl) || !/^[\w./-]+$/.test(a.localBranch))
    throw new Error('the clone input is not an https URL and a branch name');
  const env = cloneEnv(cfg, input.repositoryUrl, a.ca ?? cfg.gitCA);
  const dir = join(cfg.home, 'src');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await git(['init', '-q', '-b', a.localBranch], dir, env);
  await git(['remote', 'add', 'origin', input.repositoryUrl], dir, env);
  await git(['fetch', '-q', '--no-tags', 'origin', input.snapshotRef], dir, env);
  await git(['checkout', '-q', '-B', a.localBranch, 'FETCH_HEAD'], dir, env);
  await git(['config', `branch.${a.localBranch}.remote`, 'origin'], dir, env);
  await git(['config', `branch.${a.localBranch}.merge`, input.workspaceBranch], dir, env);
  const commit = await git(['rev-parse', 'HEAD'], dir, env);
  return { operation: a.operation, attempt: a.attempt, result: 'succeeded', commit };
}

/**
 * Runs a dispatched clone once, journaled: started before git runs, the result after. A failure's
 * reason (git's last words) goes into the report, so the Operation says why.
 */
export async function cloneOnce(
  cfg: NodeConfig,
  a: Extract<NodeAction, { kind: 'clone' }>,
  log: Logger,
): Promise<CloneReport> {
  writeJournal(cfg, a.operation, a.attempt, { state: 'started' });
  let clone: CloneReport;
  try {
    clone = await runClone(cfg, a);
  } catch (err) {
    log.warn({ err, operation: a.operation, attempt: a.attempt }, 'clone failed');
    const message = cloneMessage(err instanceof Error ? err.message : String(err));
    clone = { operation: a.operation, attempt: a.attempt, result: 'failed', ...(message ? { message } : {}) };
  }
  writeJournal(cfg, a.operation, a.attempt, { state: 'done', clone });
  return clone;
}

/** Fenced refusals that mean this instance is no longer the Workspace's Node. */
const FENCED = /\b(stale_node|stale_sandbox|node_identity_mismatch):/;

export class NodeAgent {
  private last: NodeReportDoc | undefined;
  private fenced = false;
  private readonly wsPath: string;

  constructor(
    private readonly cfg: NodeConfig,
    private readonly client: KubeClient,
    private readonly log: Logger,
  ) {
    this.wsPath = `/apis/dev.kruntimes.io/v1alpha1/namespaces/${cfg.namespace}/workspaces/${cfg.workspace}`;
  }

  get isFenced(): boolean {
    return this.fenced;
  }

  private async currentOperation(ws: Workspace): Promise<Operation | undefined> {
    const ref = ws.status?.operation;
    if (!ref?.name || ref.state === 'succeeded' || ref.state === 'failed') return undefined;
    const path = `/apis/dev.kruntimes.io/v1alpha1/namespaces/${this.cfg.namespace}/operations/${ref.name}`;
    return this.client.get<Operation>(path).catch((err: unknown) => {
      if (isApiError(err, 404)) return undefined;
      throw err;
    });
  }

  /** One round: read, decide, act (at most one clone and one report write). */
  async tick(now = new Date()): Promise<NodeAction['kind']> {
    if (this.fenced) return 'stale';
    const ws = await this.client.get<Workspace>(this.wsPath);
    if (!this.last) {
      const found = readNodeReport(ws.metadata.annotations);
      if (found?.sandboxId === this.cfg.self.sandboxId) this.last = found;
    }
    const view = { self: this.cfg.self, ws, op: await this.currentOperation(ws), last: this.last, now };
    let act = decideNode({
      ...view,
      journal: (op, attempt) => readJournal(this.cfg, op, attempt),
      busy: isBusy(this.cfg.home),
    });
    if (act.kind === 'stale') {
      this.fenced = true;
      this.log.warn({ why: act.why }, 'this Node instance is fenced: no more reports');
      return 'stale';
    }
    if (act.kind === 'clone') {
      const clone = await cloneOnce(this.cfg, act, this.log);
      act = { kind: 'report', report: { ...act.base, heartbeatAt: new Date().toISOString(), clone } };
    }
    if (act.kind === 'plugins') act = this.runPlugins(act);
    if (act.kind === 'report') await this.write(act.report);
    return act.kind;
  }

  /** Runs the dispatched plugin executions (each keyed by its ID); reports them with this operation's earlier results. */
  private runPlugins(a: Extract<NodeAction, { kind: 'plugins' }>): NodeAction {
    const results = a.items.map((item) => runPluginItem(this.cfg.home, item));
    for (const r of results) this.log.info({ operation: a.operation, id: r.id, result: r.result }, 'plugin execution');
    const earlier = a.base.plugins?.operation === a.operation ? a.base.plugins.results : [];
    const plugins = { operation: a.operation, results: [...earlier, ...results] };
    return { kind: 'report', report: { ...a.base, heartbeatAt: new Date().toISOString(), plugins } };
  }

  private async write(report: NodeReportDoc): Promise<void> {
    try {
      await this.client.patch(this.wsPath, { metadata: { annotations: { [NODE_REPORT]: JSON.stringify(report) } } });
      this.last = report;
    } catch (err) {
      if (isApiError(err) && FENCED.test(err.message)) {
        this.fenced = true;
        this.log.warn({ err: err.message }, 'report refused: this Node instance is fenced');
        return;
      }
      throw err;
    }
  }
}

/**
 * The agent's loop until the signal aborts. An abort (SIGTERM) ends the wait between rounds at
 * once: terminating a sandbox waits for this process to exit (bench/devws.ts measured stop's
 * terminate step waiting out the rest of the 1 s poll).
 */
export async function runNodeAgent(
  agent: Pick<NodeAgent, 'tick'>,
  cfg: NodeConfig,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  log.info({ workspace: cfg.workspace, sandbox: cfg.self.sandboxId, generation: cfg.self.generation }, 'node agent up');
  while (!signal.aborted) {
    try {
      await agent.tick();
    } catch (err) {
      log.warn({ err }, 'node agent round failed; trying again');
    }
    await sleep(cfg.pollMs, undefined, { signal }).catch(() => undefined);
  }
}
