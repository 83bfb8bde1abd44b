import assert from 'node:assert/strict';
import {
  bindInputs,
  buildCallWorkflowRun,
  CallError,
  callChain,
  calledWorkflows,
  closedObject,
  ExpressionError,
  materializeCall,
  MAX_CALL_DEPTH,
  outputContractAnnotations,
  outputContractFromAnnotations,
  reachableWorkflows,
  renderInputs,
  resolveCallOutputs,
  validateCallGraph,
  type JobSpec,
  type WorkflowSpec,
} from './core.ts';

const wf = (...uses: string[]): WorkflowSpec => {
  const entries: [string, JobSpec][] = uses.length
    ? uses.map((u, i) => [`call${i}`, { uses: u }])
    : [['build', { 'runs-on': 'bash', steps: [{ name: 's', run: 'true' }] }]];
  return { jobs: Object.fromEntries(entries) };
};
const lookupOf =
  (m: Record<string, WorkflowSpec>) =>
  (n: string): WorkflowSpec | undefined =>
    m[n];

function callError(fn: () => unknown, code: string, message: string): void {
  assert.throws(fn, (e: unknown) => e instanceof CallError && e.code === code && e.message === message);
}

describe('workflow-core calls: call graph', () => {
  it('lists called workflows sorted and unique', () => {
    assert.deepEqual(calledWorkflows(wf('b', 'a', 'b')), ['a', 'b']);
  });

  it('accepts a DAG of calls (shared callees are fine)', () => {
    const m = { A: wf('B', 'C'), B: wf('D'), C: wf('D'), D: wf() };
    validateCallGraph('A', lookupOf(m));
    assert.deepEqual(reachableWorkflows('A', lookupOf(m)), ['A', 'B', 'C', 'D']);
  });

  it('reports a cycle with the chain (upstream message)', () => {
    callError(
      () => validateCallGraph('A', lookupOf({ A: wf('B'), B: wf('A') })),
      'cycle',
      'workflow call cycle: A -> B -> A',
    );
    callError(
      () => validateCallGraph('A', lookupOf({ A: wf('B'), B: wf('C'), C: wf('B') })),
      'cycle',
      'workflow call cycle: B -> C -> B',
    );
    callError(() => validateCallGraph('A', lookupOf({ A: wf('A') })), 'cycle', 'workflow call cycle: A -> A');
  });

  it('detects re-entry into a caller of a nested child WorkflowRun', () => {
    callError(
      () => validateCallGraph('A', lookupOf({ A: wf(), B: wf() }), ['A', 'B']),
      'cycle',
      'workflow call cycle: A -> B -> A',
    );
  });

  it('bounds the depth', () => {
    const m: Record<string, WorkflowSpec> = {};
    for (let i = 0; i < 10; i++) m[`W${i}`] = i < 9 ? wf(`W${i + 1}`) : wf();
    assert.equal(MAX_CALL_DEPTH, 8);
    callError(
      () => validateCallGraph('W0', lookupOf(m)),
      'depth',
      'workflow call depth exceeds maximum 8: W0 -> W1 -> W2 -> W3 -> W4 -> W5 -> W6 -> W7 -> W8',
    );
    validateCallGraph('W2', lookupOf(m));
  });

  it('reports a missing workflow with the chain', () => {
    callError(
      () => validateCallGraph('A', lookupOf({ A: wf('B') })),
      'missing-workflow',
      'reusable workflow "B" does not exist (call chain: A -> B)',
    );
  });
});

describe('workflow-core calls: inputs', () => {
  const declared = {
    env: { required: true },
    region: { default: 'eu' },
    dry: { type: 'boolean' as const, default: 'false' },
    replicas: { type: 'number' as const },
  };

  it('binds values, defaults and empty optional inputs', () => {
    assert.deepEqual(bindInputs(declared, { env: 'prod', replicas: '3' }), {
      dry: 'false',
      env: 'prod',
      region: 'eu',
      replicas: '3',
    });
    assert.deepEqual(
      bindInputs(declared, { env: '' }),
      { dry: 'false', env: '', region: 'eu', replicas: '' },
      'explicit empty satisfies required (upstream)',
    );
  });

  it('rejects unknown, missing and mistyped inputs', () => {
    callError(() => bindInputs(declared, { env: 'x', color: 'red' }), 'input', 'unknown input "color"');
    callError(() => bindInputs(declared, {}), 'input', 'missing required input "env"');
    callError(
      () => bindInputs(declared, { env: 'x', dry: 'yes' }),
      'input',
      'input "dry" must be a boolean ("true" or "false"), got "yes"',
    );
    callError(
      () => bindInputs(declared, { env: 'x', replicas: 'three' }),
      'input',
      'input "replicas" must be a number, got "three"',
    );
    callError(
      () => bindInputs({ n: { type: 'number', default: 'x' } }, {}),
      'input',
      'default of input "n" must be a number, got "x"',
    );
    callError(() => bindInputs(undefined, { a: '1' }), 'input', 'unknown input "a"');
  });
});

describe('workflow-core calls: materialization', () => {
  const inputs = { name: 'World', danger: '${{ steps.x.outputs.y }}', q: "it's" };

  it('renders inputs-only expressions to their values', () => {
    assert.equal(
      renderInputs("echo ${{ inputs.name }} ${{ format('{0}!', inputs.name) }}", inputs, 'f'),
      'echo World World!',
    );
    assert.equal(renderInputs('plain', inputs, 'f'), 'plain');
  });

  it('keeps other expressions for the child, substituting inputs as literals', () => {
    assert.equal(renderInputs('${{ steps.a.outputs.v }}', inputs, 'f'), '${{ steps.a.outputs.v }}');
    assert.equal(
      renderInputs('${{ inputs.q == steps.a.outputs.v }}', inputs, 'f'),
      "${{ 'it''s' == steps.a.outputs.v }}",
    );
    assert.equal(renderInputs('${{ success() && inputs.name }}', inputs, 'f'), "${{ success() && 'World' }}");
  });

  it('never lets an input value become an expression', () => {
    assert.equal(renderInputs('${{ inputs.danger }}', inputs, 'f'), "${{ '${{ steps.x.outputs.y }}' }}");
  });

  it('rejects unknown inputs and dynamic input access', () => {
    assert.throws(
      () => renderInputs('${{ inputs.nope }}', inputs, 'jobs.a.steps[0].run'),
      (e: unknown) =>
        e instanceof ExpressionError &&
        /^jobs\.a\.steps\[0\]\.run: unknown input "nope" \(declared: danger, name, q\)/.test(e.message),
    );
    assert.throws(
      () => renderInputs('${{ inputs[steps.a.outputs.k] }}', inputs, 'f'),
      /inputs may only be read as inputs\.<name>/,
    );
  });

  it('materializes every string field of the called jobs', () => {
    const spec: WorkflowSpec = {
      inputs: { env: { required: true }, n: { default: '2' } },
      jobs: {
        deploy: {
          'runs-on': 'bash',
          if: "inputs.env == 'prod'",
          strategy: { matrix: { shard: "${{ fromJSON(format('[{0}]', inputs.n)) }}" } },
          steps: [
            { name: 'go', run: 'deploy ${{ inputs.env }}', args: ['${{ inputs.n }}'], env: { E: '${{ inputs.env }}' } },
          ],
          outputs: { url: '${{ steps.go.outputs.url }}' },
        },
      },
    };
    const { inputs: bound, jobs } = materializeCall(spec, { env: 'prod' });
    assert.deepEqual(bound, { env: 'prod', n: '2' });
    assert.deepEqual(jobs.deploy, {
      'runs-on': 'bash',
      if: "'prod' == 'prod'",
      strategy: { matrix: { shard: "${{ fromJSON(format('[{0}]', '2')) }}" } },
      steps: [{ name: 'go', run: 'deploy prod', args: ['2'], env: { E: 'prod' } }],
      outputs: { url: '${{ steps.go.outputs.url }}' },
    });
  });
});

describe('workflow-core calls: output contract and child WorkflowRun', () => {
  it('freezes outputs in annotations and reads them back', () => {
    const ann = outputContractAnnotations({ url: { value: '${{ jobs.apply.outputs.url }}' } });
    assert.deepEqual(ann, { 'kruntimes.io/workflow-output.url': '${{ jobs.apply.outputs.url }}' });
    assert.deepEqual(outputContractFromAnnotations({ ...ann, other: 'x' }), { url: '${{ jobs.apply.outputs.url }}' });
    callError(
      () => outputContractAnnotations({ 'bad name': { value: 'x' } }),
      'output-contract',
      'output name "bad name" cannot be represented as a WorkflowRun annotation',
    );
    assert.throws(
      () => outputContractAnnotations({ big: { value: 'x'.repeat(250 * 1024) } }),
      /output contract is \d+ bytes, exceeds 245760 byte annotation limit/,
    );
  });

  it('resolves outputs against the succeeded child jobs', () => {
    const jobs = {
      apply: { phase: 'Succeeded' as const, outputs: { url: 'https://x' } },
      smoke: { phase: 'Failed' as const, outputs: { t: '1' } },
    };
    assert.deepEqual(resolveCallOutputs({ url: '${{ jobs.apply.outputs.url }}' }, jobs), { url: 'https://x' });
    assert.throws(
      () => resolveCallOutputs({ t: '${{ jobs.smoke.outputs.t }}' }, jobs),
      /outputs\.t\.value: jobs has no job "smoke"/,
    );
  });

  it('builds the child WorkflowRun with labels, contract and call chain', () => {
    const lookup = lookupOf({
      deploy: {
        inputs: { env: { required: true } },
        outputs: { url: { value: '${{ jobs.a.outputs.u }}' } },
        jobs: { a: { 'runs-on': 'bash', steps: [{ name: 's', run: 'echo ${{ inputs.env }}' }] } },
      },
    });
    const ctx = {
      contexts: {
        needs: closedObject(
          { b: closedObject({ outputs: closedObject({ env: 'prod' }, 'output'), result: 'success' }, 'property') },
          'job',
        ),
      },
    };
    const plan = buildCallWorkflowRun({
      workflowRun: { name: 'rel', uid: 'u1' },
      job: 'ship',
      jobSpec: { uses: 'deploy', with: { env: '${{ needs.b.outputs.env }}' } },
      ctx,
      lookup,
      callers: ['top'],
    });
    assert.equal(plan.kind, 'create');
    if (plan.kind !== 'create') return;
    assert.match(plan.workflowRun.name, /^rel-[0-9a-f]{10}$/);
    assert.deepEqual(plan.workflowRun.labels, {
      'kruntimes.io/workflowrun-uid': 'u1',
      'kruntimes.io/workflow-job': 'ship',
    });
    assert.deepEqual(plan.workflowRun.annotations, {
      'kruntimes.io/workflow-output.url': '${{ jobs.a.outputs.u }}',
      'kruntimes.io/workflow-call-chain': 'top,deploy',
    });
    assert.equal(plan.workflowRun.spec.jobs.a?.steps?.[0]?.run, 'echo prod');
    assert.deepEqual(callChain(plan.workflowRun.annotations), ['top', 'deploy']);
  });

  it('fails the call job with upstream messages', () => {
    const base = { workflowRun: { name: 'r', uid: 'u' }, job: 'j', ctx: { contexts: {} } };
    const m = {
      A: { jobs: { x: { uses: 'A' } } },
      B: {
        inputs: { need: { required: true } },
        jobs: { x: { 'runs-on': 'bash', steps: [{ name: 's', run: 'true' }] } },
      },
    };
    const msg = (uses: string, w?: Record<string, string>): string => {
      const p = buildCallWorkflowRun({ ...base, jobSpec: { uses, ...(w ? { with: w } : {}) }, lookup: lookupOf(m) });
      return p.kind === 'fail' ? p.message : 'created';
    };
    assert.equal(msg('nope'), 'reusable workflow "nope" for job "j" does not exist');
    assert.equal(msg('A'), 'validate reusable workflow "A" for job "j": workflow call cycle: A -> A');
    assert.equal(msg('B'), 'materialize reusable workflow "B" for job "j": missing required input "need"');
    assert.match(
      msg('B', { need: '${{ needs.x.outputs.y }}' }),
      /^resolve inputs for job "j": jobs\.j\.with\.need: context "needs" is not available here/,
    );
  });
});
