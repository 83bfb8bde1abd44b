/**
 * Workflows on the real cluster: the seed's ci-data-sharing-demo verbatim (job-local workspace,
 * artifact between jobs, seed status model), GitHub-Actions semantics beyond upstream (if:,
 * failure(), always(), continue-on-error, matrix with every combination's outputs), expression
 * errors with their field path, cycles, cancellation, and Runtime Pod loss.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import type { KubeObject } from '../lib/kube/types.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { renderRun } from '../cli/wf/commands.ts';
import { E2E_ROOT } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, type Obj } from './helpers.ts';
import { GROUP, PER_NODE, getRun, runtimePods } from './runs-helpers.ts';

type Step = { name: string; phase?: string; runName?: string; outputs?: Record<string, string> };
type Job = {
  phase?: string;
  outputs?: Record<string, string>;
  artifacts?: Record<
    string,
    { name: string; driver: string; type: string; location: { filesystem?: { path: string } } }
  >;
  steps?: Step[];
  message?: string;
};
type Wfr = Obj & {
  status?: {
    phase?: string;
    message?: string;
    jobs?: Record<string, Job>;
    conditions?: { type: string; status: string; message: string }[];
  };
};

async function workflowRun(ns: string, name: string, jobs: Record<string, unknown>): Promise<void> {
  await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'WorkflowRun',
    metadata: { name },
    spec: { jobs },
  });
}
async function done(ns: string, name: string, timeoutMs = 60_000): Promise<Wfr> {
  return eventually(
    `WorkflowRun ${name} to finish`,
    async () => {
      const w = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/${name}`);
      return ['Succeeded', 'Failed', 'Cancelled'].includes(w.status?.phase ?? '') ? w : undefined;
    },
    timeoutMs,
    50,
  );
}
const logs = async (ns: string, run: string): Promise<string[]> =>
  (
    await admin().request<{ items: { message: string }[] }>(
      'GET',
      `/apis/logs.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/log`,
    )
  ).items.map((i) => i.message);

describe('Workflows', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('wf');
    for (const doc of parseAllDocuments(
      readFileSync(join(REPO_ROOT, 'examples/workflows/runtime-bash.yaml'), 'utf8'),
    ).map((d) => d.toJSON() as KubeObject & { kind: string })) {
      await admin().create(
        doc.kind === 'Runtime'
          ? `${GROUP}/namespaces/${ns}/runtimes`
          : `/api/v1/namespaces/${ns}/persistentvolumeclaims`,
        doc,
      );
    }
    await runtimePods(ns, 'bash', PER_NODE);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('runs the seed ci-data-sharing-demo: shared job workspace, artifact to the next job, seed status model', async () => {
    const wf = parse(
      readFileSync(join(REPO_ROOT, 'examples/workflows/ci-data-sharing-demo.yaml'), 'utf8'),
    ) as KubeObject;
    await admin().create(`${GROUP}/namespaces/${ns}/workflows`, wf);
    await eventually('Workflow Ready', async () =>
      (await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflows/ci-data-sharing-demo`)).status?.conditions?.some(
        (c) => c.type === 'Ready' && c.status === 'True',
      ),
    );
    await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, renderRun(wf as never, {}, 'demo'));
    const w = await done(ns, 'demo');
    assert.equal(w.status?.phase, 'Succeeded', w.status?.message);
    const build = w.status?.jobs?.build;
    assert.deepEqual(
      build?.steps?.map((s) => [s.name, s.phase]),
      [
        ['checkout', 'Succeeded'],
        ['test', 'Succeeded'],
        ['package', 'Succeeded'],
      ],
    );
    assert.deepEqual(build?.steps?.[1]?.outputs, { tests: 'passed' });
    const art = build?.artifacts?.['dist.tgz'];
    assert.equal(art?.name, 'dist.tgz');
    assert.equal(art?.type, 'file');
    assert.match(art?.location.filesystem?.path ?? '', /\/dist\.tgz$/);
    const runs = await Promise.all((build?.steps ?? []).map((s) => getRun(ns, s.runName ?? '')));
    assert.equal(
      new Set(runs.map((r) => r.status?.assignedPod)).size,
      1,
      'the three build steps ran on one Runtime Pod',
    );
    const wsNames = new Set(runs.map((r) => (r.spec.workspace as { name: string }).name));
    assert.equal(wsNames.size, 1, 'and shared one job-local workspace');
    const pw = await admin().get<Obj>(`${GROUP}/namespaces/${ns}/persistentworkspaces/${[...wsNames][0]}`);
    assert.equal(pw.metadata.ownerReferences?.[0]?.kind, 'WorkflowRun');
    assert.equal(pw.metadata.labels?.['kruntimes.io/workflow-job'], 'build');
    const verify = w.status?.jobs?.deploy?.steps?.[0]?.runName ?? '';
    assert.deepEqual(await logs(ns, verify), ['src/', 'src/app.py', 'artifact verified']);
    assert.ok(!JSON.stringify(w.status).includes('boundPod'), 'Workflow status shows no workspace binding details');
  });

  it('applies if:, failure(), always(), needs.<job>.result and continue-on-error like GitHub Actions', async () => {
    await workflowRun(ns, 'semantics', {
      flaky: { 'runs-on': 'bash', 'continue-on-error': true, steps: [{ name: 'boom', run: 'exit 1' }] },
      broken: {
        'runs-on': 'bash',
        steps: [
          { name: 'fail', run: 'echo nope >&2; exit 2' },
          { name: 'after', run: 'echo unreachable' },
          { name: 'cleanup', if: '${{ always() }}', run: 'echo "cleaned=yes" >> "$KRUNTIME_OUTPUTS"' },
        ],
      },
      onfailure: {
        'runs-on': 'bash',
        needs: ['broken'],
        if: "${{ failure() && needs.broken.result == 'failure' }}",
        steps: [{ name: 'notify', run: 'echo "notified=${{ needs.broken.result }}" >> "$KRUNTIME_OUTPUTS"' }],
      },
      skipped: { 'runs-on': 'bash', needs: ['broken'], steps: [{ name: 'never', run: 'true' }] },
      tolerant: {
        'runs-on': 'bash',
        needs: ['flaky'],
        steps: [{ name: 'runs', run: 'echo "flaky=${{ needs.flaky.result }}" >> "$KRUNTIME_OUTPUTS"' }],
      },
    });
    const w = await done(ns, 'semantics');
    const j = w.status?.jobs ?? {};
    assert.equal(w.status?.phase, 'Failed');
    assert.equal(j.broken?.phase, 'Failed');
    assert.deepEqual(
      j.broken?.steps?.map((s) => s.phase),
      ['Failed', 'Skipped', 'Succeeded'],
    );
    assert.deepEqual(j.broken?.steps?.[2]?.outputs, { cleaned: 'yes' });
    assert.equal(j.onfailure?.phase, 'Succeeded');
    assert.deepEqual(j.onfailure?.steps?.[0]?.outputs, { notified: 'failure' });
    assert.equal(j.skipped?.phase, 'Skipped');
    assert.equal(j.tolerant?.phase, 'Succeeded', 'a continue-on-error failure does not block dependents');
  });

  it("fans out a matrix and keeps every combination's outputs", async () => {
    await workflowRun(ns, 'matrix', {
      square: {
        'runs-on': 'bash',
        strategy: { matrix: { n: ['2', '3', '4'] } },
        outputs: { sq: '${{ steps.calc.outputs.sq }}' },
        steps: [{ name: 'calc', run: 'echo "sq=$(( ${{ matrix.n }} * ${{ matrix.n }} ))" >> "$KRUNTIME_OUTPUTS"' }],
      },
    });
    const w = await done(ns, 'matrix');
    assert.equal(w.status?.phase, 'Succeeded', w.status?.message);
    const sq = JSON.parse(w.status?.jobs?.square?.outputs?.sq ?? '{}') as Record<string, string>;
    assert.deepEqual(Object.values(sq).sort(), ['16', '4', '9']);
  });

  it('reports expression errors with the expression and the field path, and rejects cycles', async () => {
    await workflowRun(ns, 'bad-expr', {
      a: { 'runs-on': 'bash', steps: [{ name: 's', run: 'echo ${{ steps.nope.outputs.x = 1 }}' }] },
    });
    const w = await done(ns, 'bad-expr');
    assert.equal(w.status?.phase, 'Failed');
    assert.match(JSON.stringify(w.status), /jobs\.a\.steps\[0\]\.run/);
    assert.match(JSON.stringify(w.status), /steps\.nope\.outputs\.x = 1/);
    await workflowRun(ns, 'cycle', {
      a: { 'runs-on': 'bash', needs: ['b'], steps: [{ name: 's', run: 'true' }] },
      b: { 'runs-on': 'bash', needs: ['a'], steps: [{ name: 's', run: 'true' }] },
    });
    const c = await done(ns, 'cycle');
    assert.equal(c.status?.phase, 'Failed');
    assert.match(c.status?.message ?? '', /workflow job dependency cycle: a -> b -> a/);
  });

  it('rejects importing an artifact from a job that is not a direct need', async () => {
    await workflowRun(ns, 'bad-artifact', {
      make: { 'runs-on': 'bash', steps: [{ name: 'mk', run: 'echo x > "$KRUNTIME_ARTIFACTS_DIR/a.txt"' }] },
      use: {
        'runs-on': 'bash',
        steps: [{ name: 'u', run: 'cat a.txt', artifacts: [{ from: 'jobs.make.artifacts.a.txt', path: 'a.txt' }] }],
      },
    });
    const w = await done(ns, 'bad-artifact');
    assert.equal(w.status?.phase, 'Failed');
    assert.match(w.status?.message ?? '', /"make" is not in the needs of job "use"/);
  });

  it('calls reusable Workflows with inputs and outputs; the child WorkflowRun owns its job workspace; call cycles fail', async () => {
    const wf = (name: string, spec: Record<string, unknown>): Promise<unknown> =>
      admin().create(`${GROUP}/namespaces/${ns}/workflows`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Workflow',
        metadata: { name },
        spec,
      });
    await wf('greeter', {
      inputs: { who: { required: true } },
      outputs: { greeting: { value: '${{ jobs.say.outputs.greeting }}' } },
      jobs: {
        say: {
          'runs-on': 'bash',
          outputs: { greeting: '${{ steps.hello.outputs.msg }}' },
          steps: [{ name: 'hello', run: 'echo "msg=hello ${{ inputs.who }}" >> "$KRUNTIME_OUTPUTS"' }],
        },
      },
    });
    await workflowRun(ns, 'caller', {
      call: { uses: 'greeter', with: { who: 'world' } },
      after: {
        'runs-on': 'bash',
        needs: ['call'],
        steps: [{ name: 'use', run: 'echo "got=${{ needs.call.outputs.greeting }}" >> "$KRUNTIME_OUTPUTS"' }],
      },
    });
    const w = await done(ns, 'caller');
    assert.equal(w.status?.phase, 'Succeeded', w.status?.message ?? JSON.stringify(w.status?.jobs));
    assert.deepEqual(w.status?.jobs?.after?.steps?.[0]?.outputs, { got: 'hello world' });
    const child = (w.status?.jobs?.call as { workflowRunName?: string } | undefined)?.workflowRunName ?? '';
    const childRun = await admin().get<Obj>(`${GROUP}/namespaces/${ns}/workflowruns/${child}`);
    assert.equal(childRun.metadata.ownerReferences?.[0]?.name, 'caller');
    const pws = await admin().list<Obj>(`${GROUP}/namespaces/${ns}/persistentworkspaces`, {
      labelSelector: `kruntimes.io/workflowrun-uid=${childRun.metadata.uid}`,
    });
    assert.equal(pws.items.length, 1, 'the child WorkflowRun owns its own job workspace');
    await wf('loop-a', { jobs: { x: { uses: 'loop-b' } } });
    await wf('loop-b', { jobs: { y: { uses: 'loop-a' } } });
    await workflowRun(ns, 'cyclic', { start: { uses: 'loop-a' } });
    const c = await done(ns, 'cyclic');
    assert.equal(c.status?.phase, 'Failed');
    assert.match(JSON.stringify(c.status), /workflow call cycle: loop-a -> loop-b -> loop-a/);
  });

  it('runs Actions as they were when the WorkflowRun started (ControllerRevision snapshot), even when edited mid-run', async () => {
    await admin().create(`${GROUP}/namespaces/${ns}/actions`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Action',
      metadata: { name: 'stamp' },
      spec: { steps: [{ name: 'say', run: 'echo "version=old" >> "$KRUNTIME_OUTPUTS"' }] },
    });
    await workflowRun(ns, 'frozen', {
      build: {
        'runs-on': 'bash',
        steps: [
          { name: 'wait', run: 'sleep 1.5' },
          { name: 'stamp', uses: 'stamp' },
        ],
      },
    });
    const started = await eventually('the snapshot to be taken', async () => {
      const w = await admin().get<Wfr & { status?: { snapshotName?: string } }>(
        `${GROUP}/namespaces/${ns}/workflowruns/frozen`,
      );
      return w.status?.snapshotName ? w : undefined;
    });
    const rev = await admin().get<KubeObject>(
      `/apis/apps/v1/namespaces/${ns}/controllerrevisions/${started.status?.snapshotName}`,
    );
    assert.equal(rev.metadata.ownerReferences?.[0]?.name, 'frozen');
    await admin().patch(`${GROUP}/namespaces/${ns}/actions/stamp`, {
      spec: { steps: [{ name: 'say', run: 'echo "version=new" >> "$KRUNTIME_OUTPUTS"' }] },
    });
    const w = await done(ns, 'frozen');
    assert.equal(w.status?.phase, 'Succeeded', w.status?.message);
    const runs = await admin().list<KubeObject & { spec: unknown }>(`${GROUP}/namespaces/${ns}/runs`, {
      labelSelector: `kruntimes.io/workflowrun-uid=${w.metadata.uid}`,
    });
    const specs = runs.items.map((r) => JSON.stringify(r.spec));
    assert.ok(
      specs.some((x) => x.includes('version=old')),
      'the Action step ran the version frozen at start',
    );
    assert.ok(!specs.some((x) => x.includes('version=new')), 'the edit did not reach the running WorkflowRun');
  });

  it('binds a called Workflow when the call becomes ready (an edit made while an earlier job runs is used) and freezes it once the child exists', async () => {
    const lib = (version: string): Record<string, unknown> => ({
      outputs: { version: { value: '${{ jobs.v.outputs.version }}' } },
      jobs: {
        v: {
          'runs-on': 'bash',
          outputs: { version: '${{ steps.s.outputs.version }}' },
          steps: [{ name: 's', run: `sleep 2; echo "version=${version}" >> "$KRUNTIME_OUTPUTS"` }],
        },
      },
    });
    await admin().create(`${GROUP}/namespaces/${ns}/workflows`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'versioned' },
      spec: lib('at-start'),
    });
    await workflowRun(ns, 'late-binding', {
      first: { 'runs-on': 'bash', steps: [{ name: 'wait', run: 'sleep 3' }] },
      call: { uses: 'versioned', needs: ['first'] },
    });
    await eventually('the first job to run', async () => {
      const w = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/late-binding`);
      return w.status?.jobs?.first?.phase === 'Running';
    });
    await admin().patch(`${GROUP}/namespaces/${ns}/workflows/versioned`, { spec: lib('edited-while-first-ran') });
    const child = await eventually('the child WorkflowRun', async () => {
      const w = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/late-binding`);
      return (w.status?.jobs?.call as { workflowRunName?: string } | undefined)?.workflowRunName;
    });
    await admin().patch(`${GROUP}/namespaces/${ns}/workflows/versioned`, { spec: lib('edited-after-child') });
    const w = await done(ns, 'late-binding');
    assert.equal(w.status?.phase, 'Succeeded', w.status?.message ?? JSON.stringify(w.status?.jobs));
    assert.deepEqual(w.status?.jobs?.call?.outputs, { version: 'edited-while-first-ran' });
    const c = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/${child}`);
    assert.equal(c.metadata.labels?.['workflows.kruntimes.io/workflow'], 'versioned');
    assert.doesNotMatch(JSON.stringify(c.spec), /edited-after-child/);
  });

  it('propagates cancellation to running steps', async () => {
    await workflowRun(ns, 'cancelled', {
      slow: {
        'runs-on': 'bash',
        steps: [
          { name: 'sleep', run: 'sleep 60' },
          { name: 'later', run: 'true' },
        ],
      },
    });
    const running = await eventually('the step Run to be running', async () => {
      const w = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/cancelled`);
      const run = w.status?.jobs?.slow?.steps?.[0]?.runName;
      return run && (await getRun(ns, run)).status?.phase === 'Running' ? run : undefined;
    });
    await admin().patch(`${GROUP}/namespaces/${ns}/workflowruns/cancelled`, { spec: { cancelRequested: true } });
    const w = await done(ns, 'cancelled');
    assert.equal(w.status?.phase, 'Cancelled');
    assert.equal((await getRun(ns, running)).status?.phase, 'Cancelled');
    assert.notEqual(w.status?.jobs?.slow?.steps?.[1]?.phase, 'Succeeded');
  });

  it('fails the job with a clear condition when its workspace is lost with the Runtime Pod, keeping earlier artifacts', async () => {
    await workflowRun(ns, 'pod-loss', {
      first: { 'runs-on': 'bash', steps: [{ name: 'produce', run: 'echo kept > "$KRUNTIME_ARTIFACTS_DIR/kept.txt"' }] },
      second: {
        'runs-on': 'bash',
        needs: ['first'],
        steps: [
          { name: 'warm', run: 'echo warm' },
          { name: 'hang', run: 'sleep 60' },
        ],
      },
    });
    const hangRun = await eventually('the hang step to run', async () => {
      const w = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/pod-loss`);
      const run = w.status?.jobs?.second?.steps?.[1]?.runName;
      return run && (await getRun(ns, run)).status?.phase === 'Running' ? await getRun(ns, run) : undefined;
    });
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${hangRun.status?.assignedPod}`);
    const w = await done(ns, 'pod-loss', 90_000);
    assert.equal(w.status?.phase, 'Failed');
    assert.equal(w.status?.jobs?.second?.phase, 'Failed');
    const cond = await eventually('the WorkspaceLost condition', async () =>
      (await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/pod-loss`)).status?.conditions?.find(
        (c) => c.type === 'WorkspaceLost' && c.status === 'True',
      ),
    );
    assert.match(cond?.message ?? '', /job workspace was lost/);
    const kept = w.status?.jobs?.first?.artifacts?.['kept.txt'];
    assert.ok(kept, "the earlier job's artifact ref is still in status");
    const pvc = await admin().get<Obj>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/kruntimes-artifacts`);
    assert.equal(
      readFileSync(
        join(E2E_ROOT, 'volumes', String(pvc.spec?.volumeName), kept.location.filesystem?.path ?? ''),
        'utf8',
      ),
      'kept\n',
    );
  });
});
