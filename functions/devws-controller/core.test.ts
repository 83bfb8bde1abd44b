/**
 * devws-controller against an in-memory state: the handler's writes are applied as the relay
 * would (creates idempotent, status writes replace, deletes remove) and Pods become Ready as the
 * node agent would report them. Proves the create -> ready -> stop -> start path and the lease
 * epoch fence end to end at the decision level.
 */
import assert from 'node:assert/strict';
import { D, type Operation, type Project, type Workspace } from '../../lib/devws/api.ts';
import { writeBatches } from '../../lib/fn/execute.ts';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { contextFor, initProject, initWorkspace, nodeHealth, reconcileOperation } from './core.ts';
import fn, { handle } from './index.ts';
import { NODE_REPORT, readNodeReport, type NodeReportDoc } from '../../lib/devws/node-report.ts';
import { decideNode } from '../../lib/devws/node-agent.ts';

const NS = 'team';
const COMMIT = 'c'.repeat(40);
let clock = new Date('2026-12-01T12:00:00Z');
let uid = 0;

/** The status writes in the order the relay would apply them: "<Kind>/<name>:<state>". */
const writes: string[] = [];
/** Every API request the decisions asked for, as RBAC sees it: "<group>/<resource>:<verb>". */
const requests = new Set<string>();

function recordRequest(o: FnOp): void {
  if (o.op === 'requeue' || !('resource' in o)) return;
  const r = o.resource;
  const verb = o.op === 'status' ? 'update' : o.op === 'apply' ? 'patch' : o.op;
  requests.add(`${r.group}/${r.resource}${o.op === 'status' ? '/status' : ''}:${verb}`);
}

const granted = (rules: typeof fn.rbac, request: string): boolean => {
  const [target = '', verb = ''] = request.split(':');
  const [group = '', resource = ''] = target.split(/\/(.*)/s);
  return rules.some((x) => x.apiGroups.includes(group) && x.resources.includes(resource) && x.verbs.includes(verb));
};

function apply(state: FakeState, ops: FnOp[]): void {
  // The host sends the writes of one batch in parallel (lib/fn/execute.ts writeBatches, the real
  // batching): a write ordered against the Operation's needs a barrier (several Workspaces, or a
  // Workspace and its Project, may go together).
  for (const batch of writeBatches(ops)) {
    const kinds = batch.flatMap((o) => (o.op === 'status' ? [o.resource.kind] : []));
    assert.ok(
      !(kinds.includes('Operation') && kinds.length > 1),
      `an Operation status write in one parallel batch with another: ${kinds.join(', ')}`,
    );
  }
  for (const o of ops) {
    recordRequest(o);
    if (o.op === 'create' && o.resource.kind === 'Pod') assertNamedByWorkspace(state, o.object);
    if (o.op === 'status') {
      const st = o.object.status as { state?: string; observedState?: string; lifecycle?: string };
      writes.push(
        `${o.resource.kind}/${o.object.metadata.name ?? ''}:${st.state ?? st.observedState ?? st.lifecycle ?? ''}`,
      );
    }
    if (o.op === 'create' && !state.get(o.resource, o.object.metadata.namespace, o.object.metadata.name ?? '')) {
      state.put(o.resource, {
        ...o.object,
        metadata: { ...o.object.metadata, uid: `uid-${++uid}`, creationTimestamp: clock.toISOString() },
      });
    }
    if (o.op === 'status') state.put(o.resource, o.object);
    if (o.op === 'delete') state.remove(o.resource, o.namespace, o.name);
  }
}

/**
 * A sandbox Pod is created only once its Workspace names it as the live sandbox of its generation:
 * the real Node reads its Workspace when it starts and, finding another sandbox or generation,
 * takes itself for stale and never reports again (runtimed/devws-node.ts).
 */
function assertNamedByWorkspace(state: FakeState, pod: KubeObject): void {
  const w = state.get(D.workspaces, NS, pod.metadata.labels?.['dev.kruntimes.io/workspace'] ?? '') as
    Workspace | undefined;
  const containers = (pod as { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } }).spec
    ?.containers;
  const gen = containers?.[0]?.env?.find((e) => e.name === 'KRT_GENERATION')?.value;
  assert.equal(w?.status?.sandbox?.id, pod.metadata.name, 'a sandbox Pod created while its Workspace names another');
  assert.equal(String(w?.status?.runtimeGeneration), gen, 'a sandbox Pod created for another generation');
}

/** The function host dies right after the Operation write that plans a sandbox (nothing after it is applied). */
let killAfterPlan = false;

function untilKill(state: FakeState, ops: FnOp[]): FnOp[] {
  if (!killAfterPlan) return ops;
  const plans = (o: FnOp): boolean => {
    if (o.op !== 'status' || o.resource.kind !== 'Operation') return false;
    const ensure = (x: Operation | undefined): boolean =>
      (x?.status?.effects ?? []).some((e) => e.kind === 'sandbox_ensure');
    const before = state.get(D.operations, NS, o.object.metadata.name ?? '') as Operation | undefined;
    return ensure(o.object as Operation) && !ensure(before);
  };
  const cut = ops.findIndex(plans);
  if (cut < 0) return ops;
  killAfterPlan = false;
  return ops.slice(0, cut + 1);
}

/** The second of the two status writes that end the clone step gets a 409 (the Node reported meanwhile). */
let loseSecondCloneWrite = false;

function untilConflict(state: FakeState, ops: FnOp[]): FnOp[] {
  if (!loseSecondCloneWrite) return ops;
  const endsClone = (o: FnOp): boolean => {
    if (o.op !== 'status' || o.resource.kind !== 'Operation') return false;
    const before = state.get(D.operations, NS, o.object.metadata.name ?? '') as Operation | undefined;
    return before?.status?.step === 'clone' && (o.object as Operation).status?.step !== 'clone';
  };
  const opWrite = ops.findIndex(endsClone);
  const wsWrite = ops.findIndex((o) => o.op === 'status' && o.resource.kind === 'Workspace');
  if (opWrite < 0 || wsWrite < 0) return ops;
  loseSecondCloneWrite = false;
  const lost = Math.max(opWrite, wsWrite);
  return ops.filter((_, i) => i !== lost);
}

/** What the node agent would do: every sandbox Pod runs and is Ready. */
let podsReady = 'True';
/** The Node agents (runtimed/devws-node-core.ts decisions): up, idle, and the commit their clones return (none: never finish). */
let nodesUp = true;
let nodesBusy = false;
let cloneCommit: string | undefined = COMMIT;
/** The Git Server as the controller's configuration shows it (ConfigMap kruntimes-devws), and the CA of the Nodes' last clone. */
let gitConfig: { url: string; ca?: string } = { url: 'https://git.local' };
let lastCloneCA: string | undefined;
/** Plugin executions the Nodes ran (execution IDs), and the plugins whose install fails. */
const pluginRuns: string[] = [];
const failingPlugins = new Set<string>();

function runPlugins(act: Extract<ReturnType<typeof decideNode>, { kind: 'plugins' }>): NodeReportDoc {
  const results = act.items.map((i) => {
    pluginRuns.push(i.id);
    if (failingPlugins.has(i.name)) return { id: i.id, result: 'failed' as const, message: 'invalid_plugin_manifest' };
    return { id: i.id, result: i.action === 'install' ? ('installed' as const) : ('removed' as const) };
  });
  const earlier = act.base.plugins?.operation === act.operation ? act.base.plugins.results : [];
  return { ...act.base, plugins: { operation: act.operation, results: [...earlier, ...results] } };
}

function putReport(s: FakeState, w: Workspace, r: NodeReportDoc): void {
  const annotations = { ...w.metadata.annotations, [NODE_REPORT]: JSON.stringify(r) };
  s.put(D.workspaces, { ...w, metadata: { ...w.metadata, annotations } });
}

/** Each live sandbox's Node decides as the real agent does and writes its report. */
function nodeAgents(s: FakeState): void {
  for (const o of s.list(D.workspaces, NS)) {
    const w = o as Workspace;
    const sb = w.status?.sandbox;
    const pod = sb && !sb.terminated ? s.get(D.pods, NS, sb.id) : undefined;
    if (!nodesUp || !sb || !pod) continue;
    const self = {
      nodeId: pod.metadata.annotations?.['dev.kruntimes.io/node-id'] ?? '',
      incarnation: `inc-${sb.id}`,
      sandboxId: sb.id,
      generation: sb.generation,
    };
    const last = readNodeReport(w.metadata.annotations);
    const op = s.get(D.operations, NS, w.status?.operation?.name ?? '') as Operation | undefined;
    const view = { self, ws: w, op, now: clock, journal: () => ({ state: 'none' as const }), busy: nodesBusy };
    const act = decideNode({ ...view, ...(last?.sandboxId === sb.id ? { last } : {}) });
    if (act.kind === 'report') putReport(s, w, act.report);
    if (act.kind === 'plugins') putReport(s, w, runPlugins(act));
    if (act.kind === 'clone') lastCloneCA = act.ca;
    if (act.kind === 'clone' && cloneCommit) {
      const clone = {
        operation: act.operation,
        attempt: act.attempt,
        result: 'succeeded' as const,
        commit: cloneCommit,
      };
      putReport(s, w, { ...act.base, clone });
    }
  }
}

/** The node agent's view: sandbox Pods run and are Ready unless a test takes readiness away. */
function kubelet(state: FakeState): void {
  for (const p of state.list(D.pods, NS)) {
    state.put(D.pods, {
      ...p,
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: podsReady }] },
    });
  }
}

function step(state: FakeState, epoch: number): number {
  let writes = 0;
  const run = (all: FnOp[]): void => {
    const ops = untilConflict(state, untilKill(state, all));
    writes += ops.filter((o) => o.op !== 'requeue').length;
    apply(state, ops);
  };
  for (const p of state.list(D.projects, NS)) run(initProject(p as Project));
  for (const w of state.list(D.workspaces, NS)) {
    const ws = w as Workspace;
    run(initWorkspace(ws, state.get(D.projects, NS, ws.spec.project) as Project | undefined));
  }
  for (const o of state.list(D.operations, NS)) {
    const ctx = contextFor(o as Operation, state, clock, epoch, gitConfig);
    if (ctx) run(reconcileOperation(ctx));
  }
  for (const w of state.list(D.workspaces, NS)) {
    const current = (w as Workspace).status?.operation?.name;
    const o = current ? (state.get(D.operations, NS, current) as Operation | undefined) : undefined;
    if (o?.status?.state === 'succeeded' || o?.status?.state === 'failed')
      run(nodeHealth(w as Workspace, state, clock));
  }
  kubelet(state);
  nodeAgents(state);
  return writes;
}

/** Runs until nothing is written for three rounds 5 s apart (retry_wait deferrals come due meanwhile). */
function settle(state: FakeState, epoch = 1): void {
  let idle = 0;
  for (let i = 0; i < 60; i++) {
    clock = new Date(clock.getTime() + (idle > 0 ? 5000 : 1000));
    idle = step(state, epoch) === 0 ? idle + 1 : 0;
    if (idle === 3) return;
  }
  assert.fail('the controller did not settle');
}

/** Creates a lifecycle Operation as a user would (kubectl create / krt). */
function createOp(
  s: FakeState,
  name: string,
  kind: Operation['spec']['kind'],
  workspace = 'p1-main',
  plugin?: Operation['spec']['plugin'],
): void {
  const spec = kind === 'delete_project' ? { project: 'p1', kind } : { project: 'p1', workspace, kind, plugin };
  apply(s, [{ op: 'create', resource: D.operations, object: { metadata: { name, namespace: NS }, spec } }]);
}

const op = (s: FakeState, name: string): Operation => s.get(D.operations, NS, name) as Operation;
const ws = (s: FakeState): Workspace => s.get(D.workspaces, NS, 'p1-main') as Workspace;

/** A report as the Node would write it: the current one with the given parts changed. */
function report(s: FakeState, change: Partial<NodeReportDoc>): void {
  const w = ws(s);
  const cur = readNodeReport(w.metadata.annotations);
  assert.ok(cur, 'the Node has reported');
  putReport(s, w, { ...cur, heartbeatAt: clock.toISOString(), ...change });
}

function newState(): FakeState {
  const p: Project = {
    metadata: { name: 'p1', namespace: NS, uid: 'p-uid' },
    spec: { repository: { url: 'https://git.example/o/r.git', defaultBranch: 'main' } },
    status: { snapshot: { ref: `refs/ora/upstreams/b/snapshots/${COMMIT}`, commit: COMMIT } },
  };
  const s = new FakeState([[D.projects, p]]);
  settle(s);
  return s;
}

describe('devws-controller (in-memory state)', () => {
  it('create_project: sandbox, node, clone (frozen input), ready and succeeded together; Project active', () => {
    cloneCommit = 'd'.repeat(40);
    const s = newState();
    cloneCommit = COMMIT;
    assert.equal(op(s, 'p1-create').status?.step, 'clone', 'base_commit_mismatch is not recorded');
    assert.equal(op(s, 'p1-create').status?.cloneInput?.baseCommit, COMMIT);
    report(s, { clone: { operation: 'p1-create', attempt: 0, result: 'succeeded', commit: COMMIT } });
    settle(s);
    assert.equal(op(s, 'p1-create').status?.state, 'succeeded');
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.admissionOpen, true);
    assert.equal(ws(s).status?.baseCommitId, COMMIT);
    assert.equal(ws(s).status?.workspaceBranch, 'refs/heads/workspaces/p1-main/main');
    assert.equal((s.get(D.projects, NS, 'p1') as Project).status?.lifecycle, 'active');
    const events = s.list(R.events, NS).map((e) => (e as { message?: string }).message);
    assert.ok(events.includes('create_project: running on step clone'), 'an Event per step transition');
    assert.ok(events.includes('create_project: succeeded on step done'));
    assert.equal(s.list(D.pods, NS).length, 1, 'exactly one sandbox');
  });

  it("the clone trusts the Git Server CA configured when it is dispatched, not when the sandbox was created: one configured late, then a rotated one, reach the same sandbox's Node", () => {
    // No CA was configured when the sandbox was created (a Git Server configured, or its CA
    // rotated, while a Workspace's sandbox is already up): before, the Node kept the CA baked into
    // its environment and failed every attempt of that sandbox's clone.
    cloneCommit = undefined;
    try {
      const s = newState();
      assert.equal(op(s, 'p1-create').status?.step, 'clone');
      const env = JSON.stringify(s.list(D.pods, NS)[0]);
      assert.ok(!env.includes('KRT_GIT_CA'), 'no CA is baked into the sandbox');
      assert.equal(lastCloneCA, undefined);
      gitConfig = { url: 'https://git.local', ca: 'CA-1' };
      settle(s);
      assert.equal(op(s, 'p1-create').status?.gitServerCA, 'CA-1');
      assert.equal(lastCloneCA, 'CA-1', 'the running sandbox trusts the CA configured since');
      gitConfig = { url: 'https://git.local', ca: 'CA-2' };
      settle(s);
      assert.equal(lastCloneCA, 'CA-2', 'a rotated CA reaches the next clone without a new sandbox');
      assert.equal(s.list(D.pods, NS).length, 1);
      cloneCommit = COMMIT;
      settle(s);
      assert.equal(op(s, 'p1-create').status?.state, 'succeeded');
    } finally {
      cloneCommit = COMMIT;
      gitConfig = { url: 'https://git.local' };
    }
  });

  it('stop proves idleness for the new admission epoch, terminates the sandbox; start mounts the same data without re-cloning', () => {
    const s = newState();
    const epoch = ws(s).status?.admissionEpoch ?? 0;
    nodesUp = false;
    createOp(s, 'stop1', 'stop');
    settle(s);
    assert.equal(op(s, 'stop1').status?.step, 'quiesce');
    assert.equal(ws(s).status?.admissionOpen, false);
    assert.equal(ws(s).status?.admissionEpoch, epoch + 1);
    report(s, { idle: { epoch: epoch + 1, idle: true }, generation: 0 });
    settle(s);
    assert.equal(op(s, 'stop1').status?.step, 'quiesce', 'a report of an old generation does not count (stale_node)');
    report(s, { idle: { epoch, idle: true }, generation: 1 });
    settle(s);
    assert.equal(op(s, 'stop1').status?.step, 'quiesce', 'a proof for the old epoch does not count');
    report(s, { idle: { epoch: epoch + 1, idle: true }, generation: 1 });
    nodesUp = true;
    settle(s);
    assert.equal(op(s, 'stop1').status?.state, 'succeeded');
    assert.equal(ws(s).status?.observedState, 'stopped');
    assert.ok(
      writes.indexOf('Workspace/p1-main:stopped') < writes.indexOf('Operation/stop1:succeeded'),
      'the Workspace (commit point) is written before the Operation is finished',
    );
    assert.equal(s.list(D.pods, NS).length, 0);
    assert.equal(s.list(D.pvcs, NS).length, 1, 'stop keeps the data');
    createOp(s, 'start1', 'start');
    settle(s);
    assert.equal(op(s, 'start1').status?.state, 'succeeded');
    assert.deepEqual(op(s, 'start1').status?.steps, ['sandbox', 'node', 'done']);
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.runtimeGeneration, 2);
  });

  it('node disconnect: a ready Workspace goes unavailable with admission closed; the same Node Ready again restores it', () => {
    const s = newState();
    const epoch = ws(s).status?.admissionEpoch ?? 0;
    podsReady = 'False';
    try {
      settle(s);
      assert.equal(ws(s).status?.observedState, 'unavailable');
      assert.equal(ws(s).status?.admissionOpen, false);
      assert.equal(ws(s).status?.admissionEpoch, epoch + 1);
    } finally {
      podsReady = 'True';
    }
    settle(s);
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.admissionOpen, true);
  });

  it('node heartbeat lapse: no report for 30 s makes a ready Workspace unavailable; the same Node reporting again restores it', () => {
    const s = newState();
    assert.equal(ws(s).status?.observedState, 'ready');
    nodesUp = false;
    try {
      clock = new Date(clock.getTime() + 31_000);
      settle(s);
      assert.equal(ws(s).status?.observedState, 'unavailable');
      assert.equal(ws(s).status?.admissionOpen, false);
    } finally {
      nodesUp = true;
    }
    settle(s);
    assert.equal(ws(s).status?.observedState, 'ready');
    nodesUp = false;
    try {
      clock = new Date(clock.getTime() + 31_000);
      settle(s);
      report(s, { incarnation: 'another-process' });
      settle(s);
    } finally {
      nodesUp = true;
    }
    assert.equal(ws(s).status?.observedState, 'unavailable', 'another incarnation is not the same Node reconnecting');
  });

  it('resource_in_use: a busy Node refuses to stop; the Workspace is ready again with admission open', () => {
    const s = newState();
    nodesBusy = true;
    try {
      createOp(s, 'stop2', 'stop');
      settle(s);
    } finally {
      nodesBusy = false;
    }
    assert.equal(op(s, 'stop2').status?.state, 'failed');
    assert.equal(op(s, 'stop2').status?.reason, 'resource_in_use');
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.admissionOpen, true);
    assert.equal(s.list(D.pods, NS).length, 1, 'the sandbox keeps running');
  });

  it('restart: a lost Workspace write after terminate does not block the next generation (the effect is the evidence)', () => {
    const s = newState();
    createOp(s, 'restart1', 'restart');
    for (let i = 0; i < 30 && op(s, 'restart1').status?.step !== 'sandbox'; i++) {
      clock = new Date(clock.getTime() + 1000);
      step(s, 1);
    }
    const w = ws(s);
    assert.equal(w.status?.sandbox?.terminated, true);
    // The Workspace write of the terminate step is lost (409): the Operation already moved on.
    s.put(D.workspaces, { ...w, status: { ...w.status, sandbox: { ...w.status.sandbox, terminated: false } } });
    settle(s);
    assert.equal(op(s, 'restart1').status?.state, 'succeeded', op(s, 'restart1').status?.reason);
    assert.equal(ws(s).status?.runtimeGeneration, 2);
    assert.equal(s.list(D.pods, NS).length, 1);
  });

  it('restart: a Workspace write lost after the sandbox was planned (host killed) is rebuilt from the planned effect', () => {
    const s = newState();
    createOp(s, 'restart1', 'restart');
    const planned = (): boolean => (op(s, 'restart1').status?.effects ?? []).some((e) => e.kind === 'sandbox_ensure');
    let before = ws(s);
    for (let i = 0; i < 30 && !planned(); i++) {
      before = ws(s);
      clock = new Date(clock.getTime() + 1000);
      step(s, 1);
    }
    assert.ok(planned(), 'the sandbox_ensure effect is planned');
    // The host dies after the Operation write: the Workspace never learns of the planned sandbox.
    s.put(D.workspaces, { ...ws(s), status: before.status });
    settle(s);
    const done = op(s, 'restart1');
    assert.equal(done.status?.state, 'succeeded', done.status?.reason);
    const ensure = done.status?.effects?.find((e) => e.kind === 'sandbox_ensure');
    assert.equal(ws(s).status?.sandbox?.id, ensure?.externalId ?? ensure?.id);
    assert.equal(ws(s).status?.runtimeGeneration, 2);
    assert.equal(s.list(D.pods, NS).length, 1);
  });

  it('restart: the host killed after the Operation write that plans the sandbox (before the Workspace write and the Pod): the Workspace names the sandbox before its Pod is created', () => {
    const s = newState();
    createOp(s, 'restart1', 'restart');
    killAfterPlan = true;
    try {
      settle(s);
    } finally {
      killAfterPlan = false;
    }
    const done = op(s, 'restart1');
    assert.equal(done.status?.state, 'succeeded', done.status?.reason);
    assert.equal(ws(s).status?.runtimeGeneration, 2);
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(s.list(D.pods, NS).length, 1);
  });

  it('create_project: the second write that ends the clone step gets a 409: the Workspace still records baseCommitId before it is ready', () => {
    const p: Project = {
      metadata: { name: 'p1', namespace: NS, uid: 'p-uid' },
      spec: { repository: { url: 'https://git.example/o/r.git', defaultBranch: 'main' } },
      status: { snapshot: { ref: `refs/ora/upstreams/b/snapshots/${COMMIT}`, commit: COMMIT } },
    };
    const s = new FakeState([[D.projects, p]]);
    loseSecondCloneWrite = true;
    try {
      settle(s);
    } finally {
      assert.equal(loseSecondCloneWrite, false, 'a write that ends the clone step was lost');
      loseSecondCloneWrite = false;
    }
    assert.equal(op(s, 'p1-create').status?.state, 'succeeded');
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.baseCommitId, COMMIT, 'a ready Workspace without the commit it was cloned at');
  });

  it("start: the Workspace write of the sandbox step's advance is lost (409 against the Node's first report): the node step takes the nodeId from the ensure effect", () => {
    const s = newState();
    createOp(s, 'stop1', 'stop');
    settle(s);
    createOp(s, 'start1', 'start');
    let before = ws(s);
    for (let i = 0; i < 30 && op(s, 'start1').status?.step !== 'node'; i++) {
      before = ws(s);
      clock = new Date(clock.getTime() + 1000);
      step(s, 1);
    }
    assert.equal(op(s, 'start1').status?.step, 'node');
    assert.equal(before.status?.sandbox?.nodeId, undefined, 'the plan named the sandbox, without a nodeId yet');
    // The Operation moved on to node; the Workspace write with the nodeId got a 409 (the Node had reported).
    s.put(D.workspaces, { ...ws(s), status: before.status });
    settle(s);
    const done = op(s, 'start1');
    assert.equal(done.status?.state, 'succeeded', `${done.status?.state ?? ''} on ${done.status?.step ?? ''}`);
    const ensure = done.status?.effects?.find((e) => e.kind === 'sandbox_ensure');
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.sandbox?.nodeId, ensure?.nodeId);
  });

  /** A ready Project with its main Workspace and a ready isolated one. */
  function twoWorkspaces(): FakeState {
    const s = newState();
    apply(s, [
      {
        op: 'create',
        resource: D.workspaces,
        object: { metadata: { name: 'p1-task', namespace: NS }, spec: { project: 'p1', kind: 'isolated' } },
      },
    ]);
    settle(s);
    assert.equal(op(s, 'p1-task-create').status?.state, 'succeeded');
    return s;
  }
  const wsNamed = (s: FakeState, name: string): Workspace | undefined =>
    s.get(D.workspaces, NS, name) as Workspace | undefined;

  it('delete_project: every Workspace closed for a new epoch and proven idle, sandboxes terminated, data deleted, then the Project goes', () => {
    const s = twoWorkspaces();
    const epochs = ['p1-main', 'p1-task'].map((n) => wsNamed(s, n)?.status?.admissionEpoch ?? 0);
    createOp(s, 'delp', 'delete_project');
    settle(s);
    const done = op(s, 'delp').status;
    assert.equal(done?.state, 'succeeded', done?.reason);
    assert.deepEqual(done?.steps, ['quiesce', 'terminate', 'cleanup', 'done']);
    assert.deepEqual(
      done?.workspacesBefore?.map((b) => [b.workspace, b.observedState, b.admissionEpoch]),
      [
        ['p1-main', 'ready', epochs[0]! + 1],
        ['p1-task', 'ready', epochs[1]! + 1],
      ],
    );
    const effects = (done?.effects ?? []).map(
      (e) => `${e.kind}:${e.workspace ?? ''}:${e.outcome ?? ''}:${e.leaseEpoch}`,
    );
    assert.deepEqual(effects.sort(), [
      'sandbox_terminate:p1-main:succeeded:1',
      'sandbox_terminate:p1-task:succeeded:1',
      'workspace_data_delete:p1-main:succeeded:1',
      'workspace_data_delete:p1-task:succeeded:1',
    ]);
    assert.ok(done?.effects?.every((e) => e.terminated === true || e.removed === true));
    const at = (w: string): number => writes.lastIndexOf(w);
    assert.ok(at('Project/p1:deleting') >= 0 && at('Project/p1:deleting') < at('Operation/delp:succeeded'));
    assert.ok(at('Operation/delp:succeeded') < at('Project/p1:deleted'), 'deleted once the operation succeeded');
    assert.equal(s.list(D.pods, NS).length, 0, 'no sandbox left');
    assert.equal(s.list(D.pvcs, NS).length, 0, 'no Workspace data left');
    assert.equal(s.get(D.projects, NS, 'p1'), undefined, 'the Project is gone');
    assert.deepEqual(s.list(D.workspaces, NS), [], 'its Workspaces are gone');
    const del = op(s, 'delp');
    assert.deepEqual(handle({ key: `${NS}/delp`, object: del, state: s, now: clock }), [], 'the record stays, at rest');
  });

  it('delete_project refused as a whole: one busy Node fails it resource_in_use; every Workspace restored, the Project active', () => {
    const s = twoWorkspaces();
    nodesBusy = true;
    try {
      createOp(s, 'delp', 'delete_project');
      settle(s);
    } finally {
      nodesBusy = false;
    }
    assert.equal(op(s, 'delp').status?.state, 'failed');
    assert.equal(op(s, 'delp').status?.reason, 'resource_in_use');
    for (const name of ['p1-main', 'p1-task']) {
      assert.equal(wsNamed(s, name)?.status?.observedState, 'ready', name);
      assert.equal(wsNamed(s, name)?.status?.admissionOpen, true, name);
    }
    assert.equal((s.get(D.projects, NS, 'p1') as Project).status?.lifecycle, 'active');
    assert.equal(s.list(D.pods, NS).length, 2, 'both sandboxes keep running');
    assert.ok(!op(s, 'delp').status?.effects?.length, 'nothing was terminated or deleted');
  });

  it('delete_project after a lease change: its effects of the old epoch are re-observed by ID before it advances; nothing twice', () => {
    const s = twoWorkspaces();
    createOp(s, 'delp', 'delete_project');
    const planned = (): number => (op(s, 'delp').status?.effects ?? []).length;
    for (let i = 0; i < 30 && planned() === 0; i++) {
      clock = new Date(clock.getTime() + 1000);
      step(s, 1);
    }
    assert.equal(op(s, 'delp').status?.step, 'terminate');
    const before = op(s, 'delp').status;
    step(s, 2);
    const after = op(s, 'delp').status;
    assert.equal(after?.step, before?.step, 'the reconciling write advances nothing');
    assert.deepEqual(
      after?.effects?.map((e) => [e.id, e.leaseEpoch]),
      before?.effects?.map((e) => [e.id, 2]),
    );
    settle(s, 2);
    const done = op(s, 'delp').status;
    assert.equal(done?.state, 'succeeded', done?.reason);
    assert.equal(new Set(done?.effects?.map((e) => e.id)).size, done?.effects?.length, 'no effect planned twice');
    assert.equal(done?.effects?.length, 4);
  });

  it('delete_project waits for a running repository sync (retry_wait repository_operation_running), then proceeds', () => {
    const s = newState();
    const p = s.get(D.projects, NS, 'p1') as Project;
    s.put(D.projects, { ...p, status: { ...p.status, sync: { state: 'running', operationId: 'sync-1' } } });
    createOp(s, 'delp', 'delete_project');
    for (let i = 0; i < 30; i++) {
      clock = new Date(clock.getTime() + 1000);
      step(s, 1);
    }
    assert.equal(op(s, 'delp').status?.state, 'retry_wait');
    assert.equal(op(s, 'delp').status?.reason, 'repository_operation_running');
    assert.equal(op(s, 'delp').status?.workspacesBefore, undefined, 'no Workspace was touched');
    assert.equal(ws(s).status?.admissionOpen, true);
    const p2 = s.get(D.projects, NS, 'p1') as Project;
    s.put(D.projects, { ...p2, status: { ...p2.status, sync: { state: 'succeeded', operationId: 'sync-1' } } });
    settle(s);
    assert.equal(op(s, 'delp').status?.state, 'succeeded');
    assert.equal(s.get(D.projects, NS, 'p1'), undefined);
  });

  it("the function's RBAC grants every request its decisions make (the Events of each step transition too)", () => {
    requests.clear();
    const s = newState();
    for (const [name, kind] of [
      ['stop1', 'stop'],
      ['start1', 'start'],
      ['restart1', 'restart'],
      ['del1', 'delete_project'],
    ] as const) {
      createOp(s, name, kind);
      settle(s);
      assert.equal(op(s, name).status?.state, 'succeeded', name);
    }
    assert.ok(requests.has('/events:create'), 'Events are created');
    const denied = [...requests].filter((r) => !granted(fn.rbac, r));
    assert.deepEqual(denied, [], 'requests the API server refuses (403)');
  });

  it('clone_result_unknown: blocked and never dispatched again; a late definite result of the same attempt continues the same operation (success: ready; failure: the same attempt count and backoff)', () => {
    for (const late of ['succeeded', 'failed'] as const) {
      cloneCommit = undefined; // the Node's clone never finishes
      const s = newState();
      report(s, { clone: { operation: 'p1-create', attempt: 0, result: 'unknown' } });
      settle(s);
      const blocked = op(s, 'p1-create').status;
      assert.deepEqual(
        [blocked?.state, blocked?.reason, blocked?.cloneUnknown],
        ['blocked', 'clone_result_unknown', true],
      );
      assert.equal(blocked?.cloneAttempts ?? 0, 0, 'no attempt consumed, none dispatched');
      const result = late === 'succeeded' ? { result: late, commit: COMMIT } : { result: late, message: 'fatal: 503' };
      report(s, { clone: { operation: 'p1-create', attempt: 0, ...result } });
      if (late === 'failed') {
        step(s, 1);
        const again = op(s, 'p1-create').status;
        assert.deepEqual([again?.state, again?.reason, again?.cloneAttempts], ['retry_wait', 'clone_failed', 1]);
        assert.equal(again?.retryAt, new Date(clock.getTime() + 5000).toISOString(), 'the first backoff, 5 s');
        cloneCommit = COMMIT; // the next attempt is a new execution, and it succeeds
      }
      settle(s);
      cloneCommit = COMMIT;
      const done = op(s, 'p1-create').status;
      assert.equal(done?.state, 'succeeded', `${late}: ${done?.state ?? ''} ${done?.reason ?? ''}`);
      assert.equal(ws(s).status?.observedState, 'ready');
      assert.equal(ws(s).status?.baseCommitId, COMMIT);
    }
  });

  it('external_state_conflict: a re-observation that finds another result for a succeeded effect (the sandbox answers with another node) records nothing and blocks the operation', () => {
    const s = newState();
    createOp(s, 'stop1', 'stop');
    settle(s);
    nodesUp = false; // the start waits on its node step with its sandbox_ensure effect succeeded
    try {
      createOp(s, 'start1', 'start');
      settle(s);
      const waiting = op(s, 'start1').status;
      assert.equal(waiting?.step, 'node');
      const ensure = waiting?.effects?.find((e) => e.kind === 'sandbox_ensure');
      assert.equal(ensure?.outcome, 'succeeded');
      const pod = s.get(D.pods, NS, ensure?.id ?? '') as KubeObject;
      const annotations = { ...pod.metadata.annotations, 'dev.kruntimes.io/node-id': 'another-node' };
      s.put(D.pods, { ...pod, metadata: { ...pod.metadata, annotations } });
      step(s, 2); // a new lease epoch: the effect is re-observed by its ID
      const blocked = op(s, 'start1').status;
      assert.deepEqual([blocked?.state, blocked?.reason], ['blocked', 'external_state_conflict']);
      assert.deepEqual(blocked?.effects, waiting?.effects, 'the recorded result is not overwritten');
    } finally {
      nodesUp = true;
    }
  });

  it('reconcile_required: effects of an older lease epoch are re-observed by ID before the operation advances', () => {
    cloneCommit = undefined;
    const s = newState();
    cloneCommit = COMMIT;
    const effects = op(s, 'p1-create').status?.effects ?? [];
    assert.equal(effects[0]?.leaseEpoch, 1);
    const before = JSON.stringify(op(s, 'p1-create').status?.step);
    step(s, 2);
    const after = op(s, 'p1-create').status;
    assert.equal(JSON.stringify(after?.step), before, 'nothing advanced in the reconciling write');
    assert.equal(after?.effects?.[0]?.leaseEpoch, 2);
    assert.equal(after?.effects?.[0]?.outcome, 'succeeded', 'the sandbox was found by its ID');
    assert.equal(s.list(D.pods, NS).length, 1, 'no second sandbox');
  });

  describe('plugins (seed 002 plugin step)', () => {
    const MANIFEST = '{"files":{"README":"hi"}}';
    const install = (s: FakeState, name: string, plugin: string): void =>
      createOp(s, name, 'install_plugin', 'p1-main', { name: plugin, manifest: MANIFEST });

    it('install_plugin: plugin → done; the Node runs each frozen execution once; the instance is recorded, the Workspace stays ready', () => {
      const s = newState();
      pluginRuns.length = 0;
      install(s, 'inst1', 'lint');
      settle(s);
      const st = op(s, 'inst1').status;
      assert.equal(st?.state, 'succeeded');
      assert.deepEqual(st?.steps, ['plugin', 'done']);
      assert.equal(st?.plugins?.length, 1);
      assert.match(st?.plugins?.[0]?.id ?? '', /^ws-plg-[0-9a-f]{20}$/);
      assert.equal(st?.plugins?.[0]?.result, 'installed');
      assert.deepEqual(pluginRuns, [st?.plugins?.[0]?.id], 'one execution, run once');
      const w = ws(s).status;
      assert.deepEqual(w?.plugins, [{ name: 'lint', manifest: MANIFEST, state: 'installed', operation: 'inst1' }]);
      assert.equal(w?.observedState, 'ready');
      assert.equal(w?.admissionOpen, true);
      assert.equal(w?.operation?.name, 'inst1');
      assert.equal(w?.operation?.state, 'succeeded');
    });

    it('plugin: a failed item is recorded on the instance and does not block the Workspace from being ready', () => {
      const s = newState();
      failingPlugins.add('broken');
      try {
        install(s, 'inst2', 'broken');
        settle(s);
      } finally {
        failingPlugins.delete('broken');
      }
      assert.equal(op(s, 'inst2').status?.state, 'succeeded', 'every frozen item has a result');
      assert.equal(op(s, 'inst2').status?.plugins?.[0]?.result, 'failed');
      const inst = ws(s).status?.plugins?.[0];
      assert.equal(inst?.state, 'failed');
      assert.equal(inst?.message, 'invalid_plugin_manifest');
      assert.equal(ws(s).status?.observedState, 'ready');
    });

    it("start and restart re-install the Workspace's installed plugins for the new generation; the step is skipped without plugins", () => {
      const s = newState();
      createOp(s, 'r0', 'restart');
      settle(s);
      assert.deepEqual(op(s, 'r0').status?.steps, ['quiesce', 'terminate', 'sandbox', 'node', 'done']);
      install(s, 'inst3', 'lint');
      settle(s);
      pluginRuns.length = 0;
      createOp(s, 'r1', 'restart');
      settle(s);
      const st = op(s, 'r1').status;
      assert.equal(st?.state, 'succeeded');
      assert.deepEqual(st?.steps, ['quiesce', 'terminate', 'sandbox', 'node', 'plugin', 'done']);
      assert.equal(st?.plugins?.[0]?.result, 'installed');
      assert.notEqual(st?.plugins?.[0]?.id, op(s, 'inst3').status?.plugins?.[0]?.id, 'a new execution ID');
      assert.deepEqual(pluginRuns, [st?.plugins?.[0]?.id], 'run once, by the new generation');
      assert.equal(ws(s).status?.observedState, 'ready');
      assert.equal(ws(s).status?.plugins?.[0]?.operation, 'r1');
    });

    it('remove_plugin: plugin → done, the instance is dropped', () => {
      const s = newState();
      install(s, 'inst4', 'lint');
      settle(s);
      createOp(s, 'rm1', 'remove_plugin', 'p1-main', { name: 'lint' });
      settle(s);
      assert.equal(op(s, 'rm1').status?.state, 'succeeded');
      assert.equal(op(s, 'rm1').status?.plugins?.[0]?.result, 'removed');
      assert.deepEqual(ws(s).status?.plugins, []);
      assert.equal(ws(s).status?.observedState, 'ready');
    });

    it('node disconnect during install_plugin: the ready Workspace goes unavailable with admission closed; the same Node back finishes the step and restores it', () => {
      const s = newState();
      nodesUp = false;
      try {
        install(s, 'inst6', 'lint');
        settle(s);
        assert.equal(op(s, 'inst6').status?.step, 'plugin');
        assert.equal(ws(s).status?.operation?.name, 'inst6', 'the Workspace names the running operation');
        assert.equal(ws(s).status?.observedState, 'ready');
        clock = new Date(clock.getTime() + 31_000);
        settle(s);
        assert.equal(ws(s).status?.observedState, 'unavailable');
        assert.equal(ws(s).status?.admissionOpen, false);
      } finally {
        nodesUp = true;
      }
      settle(s);
      assert.equal(op(s, 'inst6').status?.state, 'succeeded');
      assert.equal(ws(s).status?.plugins?.[0]?.state, 'installed');
      assert.equal(ws(s).status?.observedState, 'ready');
      assert.equal(ws(s).status?.admissionOpen, true);
    });

    it('plugin results of another operation or of an old generation are not recorded; the step waits', () => {
      const s = newState();
      nodesUp = false;
      try {
        install(s, 'inst5', 'lint');
        settle(s);
        const id = op(s, 'inst5').status?.plugins?.[0]?.id ?? '';
        assert.equal(op(s, 'inst5').status?.step, 'plugin');
        report(s, { plugins: { operation: 'other', results: [{ id, result: 'installed' }] } });
        settle(s);
        assert.equal(op(s, 'inst5').status?.plugins?.[0]?.result, undefined, 'another operation');
        report(s, { generation: 0, plugins: { operation: 'inst5', results: [{ id, result: 'installed' }] } });
        settle(s);
        assert.equal(op(s, 'inst5').status?.plugins?.[0]?.result, undefined, 'an old generation (stale_node)');
        assert.equal(op(s, 'inst5').status?.state, 'running');
      } finally {
        nodesUp = true;
      }
      settle(s);
      assert.equal(op(s, 'inst5').status?.state, 'succeeded');
    });
  });
});
