import assert from 'node:assert/strict';
import {
  childRunName,
  initialStatus,
  reconcileStatus,
  rejectedStatus,
  type ActionSnapshot,
  type JobsSpec,
  type JobStatus,
  type StepStatus,
} from './core.ts';
import {
  artifact,
  finishRuns,
  iso,
  reconcile,
  runToEnd,
  succeed,
  T0,
  world,
  type RunScript,
  type World,
} from './testing.ts';

const job = (w: World, name: string): JobStatus => w.status.jobs?.[name] as JobStatus;
const steps = (s: JobStatus | undefined): [string, string, string | undefined][] =>
  (s?.steps ?? []).map((x: StepStatus) => [x.name, x.phase, x.conclusion]);
const cond = (list: { type: string }[] | undefined, type: string): Record<string, unknown> | undefined =>
  list?.find((c) => c.type === type);

describe('workflow-core status: initialize and reject', () => {
  it('initializes jobs, steps, pre and Accepted', () => {
    const s = initialStatus(
      { a: { 'runs-on': 'bash', steps: [{ name: 's1', run: 'x' }] }, b: { needs: ['a', 'a'], uses: 'wf' } },
      { now: iso(T0), generation: 3, snapshotName: 'snap' },
    );
    assert.deepEqual(s.jobs, {
      a: { phase: 'Pending', steps: [{ name: 's1', phase: 'Pending' }] },
      b: { phase: 'Waiting', pre: ['a'] },
    });
    assert.equal(s.phase, 'Pending');
    assert.equal(s.snapshotName, 'snap');
    assert.deepEqual(s.conditions, [
      {
        type: 'Accepted',
        status: 'True',
        reason: 'Accepted',
        message: 'WorkflowRun accepted',
        observedGeneration: 3,
        lastTransitionTime: iso(T0),
      },
    ]);
  });

  it('rejects with Failed, message and Accepted=False', () => {
    const s = rejectedStatus(undefined, 'job "a" needs unknown job "b"', { now: iso(T0), generation: 1 });
    assert.equal(s.phase, 'Failed');
    assert.equal(s.message, 'job "a" needs unknown job "b"');
    assert.deepEqual(cond(s.conditions, 'Accepted'), {
      type: 'Accepted',
      status: 'False',
      reason: 'WorkflowValidationFailed',
      message: 'job "a" needs unknown job "b"',
      observedGeneration: 1,
      lastTransitionTime: iso(T0),
    });
    assert.equal(
      reconcileStatus({ workflowRun: { name: 'w', uid: 'u' }, jobs: {}, status: s, now: iso(T0) }).status,
      s,
      'terminal status is sticky',
    );
  });
});

describe('workflow-core status: a build → deploy workflow', () => {
  const jobs: JobsSpec = {
    build: {
      'runs-on': 'bash',
      steps: [
        { name: 'checkout', run: 'git clone' },
        { name: 'test', run: 'make test' },
        { name: 'package', run: 'tar', env: { B: '2', A: '${{ steps.test.outputs.tests }}' } },
      ],
      outputs: { version: '${{ steps.test.outputs.version }}' },
    },
    deploy: {
      'runs-on': 'bash',
      needs: ['build'],
      steps: [
        {
          name: 'verify',
          run: 'deploy ${{ needs.build.outputs.version }} ${{ jobs.build.outputs.version }}',
          args: ['${{ env.A }}'],
          env: { A: 'x' },
          artifacts: [{ from: 'jobs.build.artifacts.dist.tgz', path: 'dist.tgz' }],
        },
      ],
    },
  };
  const script: RunScript = (ref) => {
    if (ref.step === 'test') return { phase: 'Succeeded', outputs: { tests: 'passed', version: '1.2.3' } };
    if (ref.step === 'package') return { phase: 'Succeeded', artifactRefs: [artifact('dist.tgz')] };
    return { phase: 'Succeeded' };
  };

  it('runs steps sequentially, passes outputs and artifacts, and succeeds', () => {
    const w = world(jobs);
    const first = reconcile(w);
    assert.deepEqual(
      first.createRuns.map((c) => [c.ref.job, c.ref.step]),
      [['build', 'checkout']],
    );
    assert.equal(first.createRuns[0]?.run.name, childRunName('wf', { job: 'build', step: 'checkout' }));
    assert.deepEqual(first.createRuns[0]?.run.labels, {
      'kruntimes.io/workflowrun-uid': 'uid-wf',
      'kruntimes.io/workflow-job': 'build',
      'kruntimes.io/workflow-step': 'checkout',
    });
    assert.equal(w.status.phase, 'Running');
    assert.equal(job(w, 'build').phase, 'Running');
    assert.equal(job(w, 'deploy').phase, 'Waiting');
    const end = runToEnd(w, script);
    assert.equal(end.phase, 'Succeeded');
    const pkg = [...w.runs.values()].find((r) => r.ref.step === 'package');
    assert.deepEqual(pkg?.spec.env, [
      { name: 'A', value: 'passed' },
      { name: 'B', value: '2' },
    ]);
    const verify = [...w.runs.values()].find((r) => r.ref.step === 'verify');
    assert.deepEqual(verify?.spec, {
      runtime: 'bash',
      source: { inline: 'deploy 1.2.3 1.2.3' },
      mode: { task: { args: ['x'] } },
      env: [{ name: 'A', value: 'x' }],
      artifactInputs: [{ artifactRef: artifact('dist.tgz'), path: 'dist.tgz' }],
    });
    assert.deepEqual(job(w, 'build').outputs, { version: '1.2.3' });
    assert.deepEqual(job(w, 'build').artifacts, { 'dist.tgz': artifact('dist.tgz') });
    assert.deepEqual(steps(job(w, 'build')), [
      ['checkout', 'Succeeded', 'success'],
      ['test', 'Succeeded', 'success'],
      ['package', 'Succeeded', 'success'],
    ]);
    assert.equal(job(w, 'build').conclusion, 'success');
    assert.ok(job(w, 'build').startedAt && job(w, 'build').finishedAt);
  });

  it('sets Completed conditions with lastTransitionTime only on flips', () => {
    const w = world(jobs);
    reconcile(w);
    const running = cond(w.status.conditions, 'Completed');
    assert.deepEqual(running, {
      type: 'Completed',
      status: 'False',
      reason: 'Running',
      message: '',
      observedGeneration: 1,
      lastTransitionTime: iso(T0),
    });
    runToEnd(w, script);
    const done = cond(w.status.conditions, 'Completed');
    assert.equal(done?.status, 'True');
    assert.equal(done?.reason, 'Succeeded');
    assert.notEqual(done?.lastTransitionTime, iso(T0));
    const jc = cond(job(w, 'deploy').conditions, 'Completed');
    assert.equal(jc?.reason, 'Succeeded');
  });

  it('is idempotent: reconciling the same observations creates nothing new', () => {
    const w = world(jobs);
    reconcile(w);
    finishRuns(w, script);
    const a = reconcile(w);
    const again = reconcileStatus({
      workflowRun: { name: 'wf', uid: 'uid-wf', generation: 1 },
      jobs,
      status: w.status,
      runs: [...w.runs.values()],
      now: iso(w.now),
    });
    assert.equal(a.createRuns.length, 1);
    assert.equal(again.createRuns.length, 0);
    assert.deepEqual(again.status, w.status);
  });

  it('never duplicates work after a crash between create and status patch', () => {
    const w = world(jobs);
    const before = w.status;
    const r = reconcile(w);
    const replay = reconcileStatus({
      workflowRun: { name: 'wf', uid: 'uid-wf', generation: 1 },
      jobs,
      status: before,
      runs: [...w.runs.values()],
      now: iso(w.now),
    });
    assert.equal(r.createRuns.length, 1);
    assert.deepEqual(replay.createRuns, [], 'the existing Run is adopted by name');
    assert.equal(replay.status.jobs?.build?.steps?.[0]?.runName, r.createRuns[0]?.run.name);
  });

  it('fails deploy deterministically when the artifact was never produced', () => {
    const w = world(jobs);
    const end = runToEnd(w, (ref) =>
      ref.step === 'test' ? { phase: 'Succeeded', outputs: { version: '1', tests: 'ok' } } : { phase: 'Succeeded' },
    );
    assert.equal(end.phase, 'Failed');
    assert.equal(
      job(w, 'deploy').steps?.[0]?.message,
      'artifact "dist.tgz" of job "build" does not exist: job "build" succeeded without producing it (produced: none)',
    );
    assert.equal(
      end.message,
      'job "deploy" failed: step "verify" failed: artifact "dist.tgz" of job "build" does not exist: job "build" succeeded without producing it (produced: none)',
    );
  });
});

describe('workflow-core status: if, continue-on-error, failures', () => {
  const jobs: JobsSpec = {
    a: {
      'runs-on': 'bash',
      steps: [
        { name: 'ok', run: 'true' },
        { name: 'flaky', run: 'false', 'continue-on-error': true },
        { name: 'boom', run: 'false' },
        { name: 'after', run: 'true' },
        {
          name: 'on-failure',
          run: 'true',
          if: "failure() && steps.flaky.outcome == 'failure' && steps.flaky.conclusion == 'success'",
        },
        { name: 'cleanup', run: 'true', if: 'always()' },
        { name: 'never', run: 'true', if: 'success()' },
      ],
    },
    b: { 'runs-on': 'bash', needs: ['a'], steps: [{ name: 's', run: 'true' }] },
    c: { 'runs-on': 'bash', needs: ['a'], if: 'failure()', steps: [{ name: 's', run: 'true' }] },
  };
  const script: RunScript = (ref) =>
    ref.step === 'flaky' || ref.step === 'boom' ? { phase: 'Failed', message: 'exit 1' } : { phase: 'Succeeded' };

  it('applies GitHub step semantics after a failure', () => {
    const w = world(jobs);
    const end = runToEnd(w, script);
    assert.deepEqual(steps(job(w, 'a')), [
      ['ok', 'Succeeded', 'success'],
      ['flaky', 'Failed', 'success'],
      ['boom', 'Failed', 'failure'],
      ['after', 'Skipped', 'skipped'],
      ['on-failure', 'Succeeded', 'success'],
      ['cleanup', 'Succeeded', 'success'],
      ['never', 'Skipped', 'skipped'],
    ]);
    assert.equal(job(w, 'a').steps?.[3]?.message, 'skipped: an earlier step failed');
    assert.equal(job(w, 'a').steps?.[6]?.message, 'skipped: if condition "success()" evaluated to false');
    assert.equal(
      job(w, 'a').steps?.[2]?.message,
      `Run "${childRunName('wf', { job: 'a', step: 'boom' })}" failed: exit 1`,
    );
    assert.equal(job(w, 'b').phase, 'Skipped');
    assert.equal(job(w, 'c').phase, 'Succeeded');
    assert.equal(end.phase, 'Failed');
    assert.match(end.message ?? '', /^job "a" failed: step "boom" failed: Run ".*" failed: exit 1$/);
  });

  it('lets a job-level continue-on-error failure count as success', () => {
    const w = world({
      a: { 'runs-on': 'bash', 'continue-on-error': true, steps: [{ name: 'x', run: 'false' }] },
      b: { 'runs-on': 'bash', needs: ['a'], steps: [{ name: 's', run: 'true' }] },
    });
    const end = runToEnd(w, (ref) => (ref.job === 'a' ? { phase: 'Failed' } : { phase: 'Succeeded' }));
    assert.equal(job(w, 'a').phase, 'Failed');
    assert.equal(job(w, 'a').outcome, 'failure');
    assert.equal(job(w, 'a').conclusion, 'success');
    assert.equal(job(w, 'b').phase, 'Succeeded');
    assert.equal(end.phase, 'Succeeded');
  });

  it('fails a step whose expressions cannot be resolved, with the upstream message form', () => {
    const w = world({
      a: {
        'runs-on': 'bash',
        steps: [
          { name: 'x', run: 'echo ${{ steps.nope.outputs.v }}' },
          { name: 'y', run: 'true', if: 'always()' },
        ],
      },
    });
    const end = runToEnd(w, succeed);
    assert.equal(end.phase, 'Failed');
    assert.equal(
      job(w, 'a').steps?.[0]?.message,
      'resolve step "x" in job "a": jobs.a.steps[0].run: steps has no step "nope" (none available) (in "steps.nope.outputs.v" at column 7)',
    );
    assert.equal(job(w, 'a').steps?.[1]?.phase, 'Succeeded');
    assert.equal(w.runs.size, 1);
  });

  it('fails a job whose outputs cannot be resolved', () => {
    const w = world({
      a: { 'runs-on': 'bash', steps: [{ name: 'x', run: 'true' }], outputs: { v: '${{ steps.x.outputs.missing }}' } },
    });
    const end = runToEnd(w, succeed);
    assert.equal(end.phase, 'Failed');
    assert.match(
      job(w, 'a').message ?? '',
      /^resolve outputs for job "a": jobs\.a\.outputs\.v: steps\.x\.outputs has no output "missing"/,
    );
  });

  it('skips a job whose if is false and still succeeds', () => {
    const w = world({ a: { 'runs-on': 'bash', if: "'x' == 'y'", steps: [{ name: 'x', run: 'true' }] } });
    const end = runToEnd(w, succeed);
    assert.equal(job(w, 'a').phase, 'Skipped');
    assert.equal(job(w, 'a').message, "skipped: if condition \"'x' == 'y'\" evaluated to false");
    assert.equal(end.phase, 'Succeeded');
    assert.equal(w.runs.size, 0);
  });
});

describe('workflow-core status: matrix jobs', () => {
  const jobs: JobsSpec = {
    build: {
      'runs-on': 'bash',
      strategy: { matrix: { os: ['linux', 'mac'], node: [18, 20] }, 'max-parallel': 2 },
      steps: [{ name: 'b', run: 'build ${{ matrix.os }} ${{ matrix.node }}' }],
      outputs: { v: '${{ steps.b.outputs.v }}' },
    },
    report: {
      'runs-on': 'bash',
      needs: ['build'],
      steps: [
        {
          name: 'r',
          run: "${{ fromJSON(needs.build.outputs.v)['18-linux'] }} ${{ needs.build.combinations['20-mac'].outputs.v }}",
        },
      ],
    },
  };
  const script: RunScript = (ref, spec) => ({
    phase: 'Succeeded',
    outputs: { v: `v-${ref.combination ?? ''}-${spec.source?.inline ?? ''}` },
  });

  it('expands, respects max-parallel, keeps every combination output', () => {
    const w = world(jobs);
    const first = reconcile(w);
    assert.deepEqual(
      first.createRuns.map((c) => c.ref.combination),
      ['18-linux', '18-mac'],
    );
    assert.equal(first.createRuns[0]?.run.labels['kruntimes.io/workflow-matrix'], '18-linux');
    assert.equal(first.createRuns[0]?.run.spec.source?.inline, 'build linux 18');
    const end = runToEnd(w, script);
    assert.equal(end.phase, 'Succeeded');
    const b = job(w, 'build');
    assert.deepEqual(
      b.combinations?.map((c) => [c.id, c.name, c.phase, c.outputs?.v]),
      [
        ['18-linux', 'build (18, linux)', 'Succeeded', 'v-18-linux-build linux 18'],
        ['18-mac', 'build (18, mac)', 'Succeeded', 'v-18-mac-build mac 18'],
        ['20-linux', 'build (20, linux)', 'Succeeded', 'v-20-linux-build linux 20'],
        ['20-mac', 'build (20, mac)', 'Succeeded', 'v-20-mac-build mac 20'],
      ],
    );
    assert.deepEqual(JSON.parse(b.outputs?.v ?? '{}'), {
      '18-linux': 'v-18-linux-build linux 18',
      '18-mac': 'v-18-mac-build mac 18',
      '20-linux': 'v-20-linux-build linux 20',
      '20-mac': 'v-20-mac-build mac 20',
    });
    const report = [...w.runs.values()].find((r) => r.ref.job === 'report');
    assert.equal(report?.spec.source?.inline, 'v-18-linux-build linux 18 v-20-mac-build mac 20');
    assert.equal(new Set([...w.runs.keys()]).size, 5);
  });

  it('cancels running and abandons pending combinations on fail-fast', () => {
    const w = world({
      build: {
        'runs-on': 'bash',
        strategy: { matrix: { n: [1, 2, 3] }, 'max-parallel': 2 },
        steps: [{ name: 's', run: 'x' }],
      },
    });
    reconcile(w);
    finishRuns(w, (ref) => (ref.combination === '1' ? { phase: 'Failed' } : 'hang'));
    const r = reconcile(w);
    assert.deepEqual(r.cancel, [
      { kind: 'Run', name: childRunName('wf', { job: 'build', combination: '2', step: 's' }), reason: 'FailFast' },
    ]);
    const end = runToEnd(w, () => 'hang');
    assert.equal(end.phase, 'Failed');
    assert.deepEqual(
      job(w, 'build').combinations?.map((c) => [c.id, c.phase, c.conclusion]),
      [
        ['1', 'Failed', 'failure'],
        ['2', 'Failed', 'cancelled'],
        ['3', 'Pending', 'cancelled'],
      ],
    );
    assert.equal(job(w, 'build').combinations?.[2]?.message, 'cancelled by fail-fast: build (1) failed');
    assert.equal(job(w, 'build').conclusion, 'failure');
  });

  it('fails the job on a bad matrix', () => {
    const w = world({
      build: { 'runs-on': 'bash', strategy: { matrix: { n: [] } }, steps: [{ name: 's', run: 'x' }] },
    });
    const end = runToEnd(w, succeed);
    assert.equal(end.phase, 'Failed');
    assert.equal(job(w, 'build').message, 'matrix key "n" of job "build" has no values');
  });
});

describe('workflow-core status: timeouts and cancellation', () => {
  it('times a job out at its deadline, cancelling its Run', () => {
    const w = world({
      a: {
        'runs-on': 'bash',
        'timeout-minutes': 1,
        steps: [
          { name: 's', run: 'sleep', 'timeout-minutes': 5 },
          { name: 't', run: 'true', if: 'always()' },
        ],
      },
    });
    const first = reconcile(w);
    assert.equal(first.createRuns[0]?.run.spec.timeout, '1m0s');
    assert.equal(first.requeueAfterMs, 60_000);
    finishRuns(w, () => 'hang');
    w.now = T0 + 61_000;
    const r = reconcile(w);
    assert.deepEqual(
      r.cancel.map((c) => c.reason),
      ['JobTimedOut'],
    );
    const end = runToEnd(w, () => 'hang');
    assert.equal(end.phase, 'Failed');
    assert.equal(job(w, 'a').conclusion, 'failure');
    assert.deepEqual(steps(job(w, 'a')), [
      ['s', 'Failed', 'cancelled'],
      ['t', 'Skipped', 'cancelled'],
    ]);
    assert.equal(cond(job(w, 'a').conditions, 'Completed')?.reason, 'TimedOut');
    assert.match(
      job(w, 'a').message ?? '',
      /the job exceeded its timeout-minutes \(deadline 2026-07-06T12:01:00\.000Z\)/,
    );
  });

  it('cancels: running children get cancel requests, nothing new starts, then Cancelled', () => {
    const w = world({
      a: {
        'runs-on': 'bash',
        steps: [
          { name: 's', run: 'x' },
          { name: 'cleanup', run: 'y', if: 'always()' },
        ],
      },
      b: { 'runs-on': 'bash', needs: ['a'], steps: [{ name: 's', run: 'x' }] },
    });
    reconcile(w);
    finishRuns(w, () => 'hang');
    w.cancelRequested = true;
    const r = reconcile(w);
    assert.deepEqual(r.cancel, [
      { kind: 'Run', name: childRunName('wf', { job: 'a', step: 's' }), reason: 'WorkflowRunCancelled' },
    ]);
    assert.equal(w.status.phase, 'Running');
    assert.equal(cond(w.status.conditions, 'Completed')?.reason, 'Cancelling');
    const end = runToEnd(w, () => 'hang');
    assert.equal(end.phase, 'Cancelled');
    assert.equal(end.message, 'WorkflowRun was cancelled');
    assert.equal(w.runs.size, 1);
    assert.deepEqual(steps(job(w, 'a')), [
      ['s', 'Failed', 'cancelled'],
      ['cleanup', 'Skipped', 'cancelled'],
    ]);
    assert.equal(job(w, 'b').phase, 'Waiting', 'never-started jobs keep their phase (upstream)');
    assert.equal(job(w, 'b').conclusion, 'cancelled');
  });

  it('cancels before anything started without creating children', () => {
    const w = world({ a: { 'runs-on': 'bash', steps: [{ name: 's', run: 'x' }] } });
    w.cancelRequested = true;
    const r = reconcile(w);
    assert.deepEqual(r.createRuns, []);
    assert.equal(w.status.phase, 'Cancelled');
  });
});

describe('workflow-core status: reusable workflow calls and Actions', () => {
  it('creates the child WorkflowRun and maps its outputs back through the contract', () => {
    const w = world(
      {
        prep: { 'runs-on': 'bash', steps: [{ name: 's', run: 'x' }], outputs: { env: '${{ steps.s.outputs.env }}' } },
        ship: { needs: ['prep'], uses: 'deploy', with: { env: '${{ needs.prep.outputs.env }}' } },
        after: {
          'runs-on': 'bash',
          needs: ['ship'],
          steps: [{ name: 'a', run: 'echo ${{ needs.ship.outputs.url }}' }],
        },
      },
      {
        workflows: {
          deploy: {
            inputs: { env: { required: true } },
            outputs: { url: { value: 'https://${{ jobs.apply.outputs.host }}' } },
            jobs: { apply: { 'runs-on': 'bash', steps: [{ name: 'go', run: 'deploy ${{ inputs.env }}' }] } },
          },
        },
      },
    );
    runToEnd(w, () => ({ phase: 'Succeeded', outputs: { env: 'staging' } }), 3);
    const child = [...w.workflowRuns.values()][0];
    assert.equal(child?.spec.jobs.apply?.steps?.[0]?.run, 'deploy staging');
    assert.equal(job(w, 'ship').workflowRunName, child?.name);
    assert.equal(job(w, 'ship').phase, 'Running');
    Object.assign(child ?? {}, {
      phase: 'Succeeded',
      jobs: { apply: { phase: 'Succeeded', outputs: { host: 'x.example' } } },
    });
    const end = runToEnd(w, succeed);
    assert.equal(end.phase, 'Succeeded');
    assert.deepEqual(job(w, 'ship').outputs, { url: 'https://x.example' });
    assert.equal(
      [...w.runs.values()].find((r) => r.ref.job === 'after')?.spec.source?.inline,
      'echo https://x.example',
    );
  });

  it('fails only the call job when the called workflow is missing', () => {
    const w = world({ ship: { uses: 'nope' }, other: { 'runs-on': 'bash', steps: [{ name: 's', run: 'x' }] } });
    const end = runToEnd(w, succeed);
    assert.equal(job(w, 'ship').message, 'reusable workflow "nope" for job "ship" does not exist');
    assert.equal(job(w, 'other').phase, 'Succeeded');
    assert.equal(end.phase, 'Failed');
  });

  it('runs Action steps sequentially and resolves their outputs', () => {
    const actions = {
      'a/setup': {
        name: 'setup-tools',
        spec: {
          inputs: { version: { required: true } },
          outputs: { path: { value: '${{ steps.install.outputs.path }}-${{ inputs.version }}' } },
          steps: [
            { name: 'fetch', run: 'fetch ${{ inputs.version }}' },
            { name: 'install', run: 'install' },
          ],
        },
      },
    };
    const w = world(
      {
        a: {
          'runs-on': 'bash',
          steps: [
            { name: 'setup', uses: 'setup-tools', with: { version: '1.2' } },
            { name: 'use', run: 'echo ${{ steps.setup.outputs.path }}' },
          ],
        },
      },
      { actions },
    );
    const end = runToEnd(w, (ref) => {
      const outputs: Record<string, string> = ref.actionStep === 'install' ? { path: '/opt' } : {};
      return { phase: 'Succeeded', outputs };
    });
    assert.equal(end.phase, 'Succeeded');
    const runs = [...w.runs.values()];
    assert.deepEqual(
      runs.map((r) => [r.ref.step, r.ref.actionStep ?? null, r.spec.source?.inline]),
      [
        ['setup', 'fetch', 'fetch 1.2'],
        ['setup', 'install', 'install'],
        ['use', null, 'echo /opt-1.2'],
      ],
    );
    assert.deepEqual(
      job(w, 'a').steps?.[0]?.actionSteps?.map((a) => [a.name, a.phase]),
      [
        ['fetch', 'Succeeded'],
        ['install', 'Succeeded'],
      ],
    );
    assert.equal(runs[1]?.name, childRunName('wf', { job: 'a', step: 'setup', actionStep: 'install' }));
  });

  it('fails an Action step when an internal step fails, and when its outputs cannot be resolved', () => {
    const action = (outputs: Record<string, { value: string }>): Record<string, ActionSnapshot> => ({
      'a/setup': {
        name: 'setup',
        spec: {
          outputs,
          steps: [
            { name: 'one', run: 'x' },
            { name: 'two', run: 'y' },
          ],
        },
      },
    });
    const jobs: JobsSpec = {
      a: {
        'runs-on': 'bash',
        steps: [
          { name: 'setup', uses: 'setup' },
          { name: 'after', run: 'z', if: 'always()' },
        ],
      },
    };
    const w1 = world(jobs, { actions: action({}) });
    const end1 = runToEnd(w1, (ref) =>
      ref.actionStep === 'one' ? { phase: 'Failed', message: 'bad' } : { phase: 'Succeeded' },
    );
    assert.equal(end1.phase, 'Failed');
    assert.match(job(w1, 'a').steps?.[0]?.message ?? '', /^action step "one": Run ".*" failed: bad$/);
    assert.deepEqual(
      job(w1, 'a').steps?.[0]?.actionSteps?.map((a) => a.phase),
      ['Failed', 'Pending'],
    );
    assert.equal(job(w1, 'a').steps?.[1]?.phase, 'Succeeded');
    const w2 = world(jobs, { actions: action({ p: { value: '${{ steps.two.outputs.nope }}' } }) });
    runToEnd(w2, succeed);
    assert.match(
      job(w2, 'a').steps?.[0]?.message ?? '',
      /^resolve outputs of Action "setup" for step "setup" in job "a": actions\.setup\.outputs\.p: steps\.two\.outputs has no output "nope"/,
    );
  });

  it('stops an Action step between internal steps on cancellation', () => {
    const w = world(
      { a: { 'runs-on': 'bash', steps: [{ name: 'setup', uses: 'setup' }] } },
      {
        actions: {
          'a/setup': {
            name: 'setup',
            spec: {
              steps: [
                { name: 'one', run: 'x' },
                { name: 'two', run: 'y' },
              ],
            },
          },
        },
      },
    );
    reconcile(w);
    finishRuns(w, succeed);
    w.cancelRequested = true;
    const end = runToEnd(w, succeed);
    assert.equal(end.phase, 'Cancelled');
    assert.equal(w.runs.size, 1);
    assert.deepEqual(steps(job(w, 'a')), [['setup', 'Failed', 'cancelled']]);
  });

  it('fails a job whose continue-on-error or timeout-minutes cannot be evaluated', () => {
    const w = world({
      a: { 'runs-on': 'bash', 'continue-on-error': '${{ matrix.nope }}', steps: [{ name: 's', run: 'x' }] },
    });
    const end = runToEnd(w, succeed);
    assert.equal(end.phase, 'Failed');
    assert.match(job(w, 'a').message ?? '', /^jobs\.a\.continue-on-error: matrix has no matrix key "nope"/);
    assert.equal(w.runs.size, 0);
  });
});
