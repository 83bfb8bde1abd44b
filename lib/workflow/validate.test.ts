import assert from 'node:assert/strict';
import { actionProblem, workflowRunProblem, type JobsSpec, type StepSpec } from './core.ts';

const inline = (steps: StepSpec[], extra: Partial<JobsSpec[string]> = {}): JobsSpec[string] => ({
  'runs-on': 'bash',
  steps,
  ...extra,
});

describe('workflow-core validate: WorkflowRun jobs', () => {
  it('accepts a valid workflow', () => {
    const jobs: JobsSpec = {
      build: inline(
        [
          { name: 'a', run: 'x' },
          { name: 'b', run: '${{ steps.a.outputs.v }}', if: 'always()' },
        ],
        { outputs: { v: '${{ steps.b.outputs.v }}' }, strategy: { matrix: { os: ['l'] } } },
      ),
      deploy: inline(
        [{ name: 'd', run: '${{ needs.build.outputs.v }} ${{ env.X }}', env: { X: '${{ jobs.build.outputs.v }}' } }],
        { needs: ['build'], if: "needs.build.result == 'success'" },
      ),
      call: { uses: 'wf', needs: ['deploy'], with: { a: '${{ needs.deploy.outputs.x }} ${{ jobs.build.outputs.v }}' } },
    };
    assert.equal(workflowRunProblem(jobs), undefined);
  });

  it('reports upstream job shape problems', () => {
    assert.equal(
      workflowRunProblem({ a: { uses: 'wf', 'runs-on': 'bash' } }),
      'job "a" uses reusable workflow "wf" and may not set runs-on or steps',
    );
    assert.equal(
      workflowRunProblem({ a: { steps: [{ name: 's', run: 'x' }] } }),
      'job "a" must set runs-on before creating child Runs',
    );
    assert.equal(
      workflowRunProblem({ a: { 'runs-on': 'bash', steps: [] } }),
      'job "a" must contain at least one step before creating child Runs',
    );
    assert.equal(
      workflowRunProblem({
        a: inline([
          { name: 's', run: 'x' },
          { name: 's', run: 'y' },
        ]),
      }),
      'job "a" has more than one step named "s"',
    );
    assert.equal(workflowRunProblem({}), 'a WorkflowRun needs at least one job');
  });

  it('reports graph, Action and artifact problems', () => {
    assert.equal(
      workflowRunProblem({
        a: inline([{ name: 's', run: 'x' }], { needs: ['b'] }),
        b: inline([{ name: 's', run: 'x' }], { needs: ['a'] }),
      }),
      'workflow job dependency cycle: a -> b -> a',
    );
    assert.equal(
      workflowRunProblem({ a: inline([{ name: 's', uses: 'act' }]) }, () => false),
      'Action "act" for step "s" in job "a" does not exist',
    );
    assert.match(
      workflowRunProblem({
        a: inline([{ name: 's', run: 'x' }]),
        b: inline([{ name: 's', run: 'x', artifacts: [{ from: 'jobs.a.artifacts.x', path: 'x' }] }]),
      }) ?? '',
      /"a" is not in the needs of job "b"/,
    );
  });

  it('reports expression problems with the field path', () => {
    const cases: [JobsSpec, string | RegExp][] = [
      [
        {
          a: inline([
            { name: 's', run: '${{ steps.later.outputs.x }}' },
            { name: 'later', run: 'x' },
          ]),
        },
        'jobs.a.steps[0].run: steps.later does not name an earlier step of job "a" (none available)',
      ],
      [
        { a: inline([{ name: 's', run: '${{ needs.b.outputs.x }}' }]), b: inline([{ name: 's', run: 'x' }]) },
        'jobs.a.steps[0].run: needs.b does not name a job in the needs of job "a" (none available)',
      ],
      [
        {
          a: inline([{ name: 's', run: '${{ jobs.c.outputs.x }}' }], { needs: ['b'] }),
          b: inline([{ name: 's', run: 'x' }]),
          c: inline([{ name: 's', run: 'x' }]),
        },
        'jobs.a.steps[0].run: jobs.c does not name a job that job "a" depends on (allowed: b)',
      ],
      [
        {
          a: inline([{ name: 's', run: '${{ matrix.arch }}' }], {
            strategy: { matrix: { os: ['l'], include: [{ extra: 1 }] } },
          }),
        },
        'jobs.a.steps[0].run: matrix.arch does not name a matrix key of job "a" (allowed: extra, os)',
      ],
      [{ a: inline([{ name: 's', run: '${{ github.sha }}' }]) }, /^jobs\.a\.steps\[0\]\.run: unknown context "github"/],
      [
        { a: inline([{ name: 's', run: 'x', env: { E: '${{ env.F }}' } }]) },
        /^jobs\.a\.steps\[0\]\.env\.E: context "env" is not available here/,
      ],
      [
        { a: inline([{ name: 's', run: 'x' }], { if: 'steps.s.outcome' }) },
        /^jobs\.a\.if: context "steps" is not available here/,
      ],
      [{ a: inline([{ name: 's', run: '${{ success() }}' }]) }, /success\(\) is only available in if: conditions/],
      [{ a: inline([{ name: 's', run: 'x', if: "'a' = 'b'" }]) }, /^jobs\.a\.steps\[0\]\.if: unexpected character '='/],
      [
        { a: inline([{ name: 's', run: 'x' }], { strategy: { matrix: { os: [] } } }) },
        'matrix key "os" of job "a" has no values',
      ],
      [
        { a: inline([{ name: 's', run: 'x' }], { outputs: { o: '${{ steps.t.outputs.v }}' } }) },
        'jobs.a.outputs.o: steps.t does not name an earlier step of job "a" (allowed: s)',
      ],
    ];
    for (const [jobs, expected] of cases) {
      const p = workflowRunProblem(jobs);
      if (typeof expected === 'string') assert.equal(p, expected);
      else assert.match(p ?? '', expected);
    }
  });

  it('does not check matrix keys of dynamic matrices', () => {
    assert.equal(
      workflowRunProblem({
        a: inline([{ name: 's', run: '${{ matrix.anything }}' }], { strategy: { matrix: "${{ fromJSON('{}') }}" } }),
      }),
      undefined,
    );
  });
});

describe('workflow-core validate: Actions', () => {
  it('checks shape and expressions of an Action', () => {
    const ok = {
      name: 'setup',
      spec: {
        inputs: { v: {} },
        outputs: { p: { value: '${{ steps.b.outputs.p }}' } },
        steps: [
          { name: 'a', run: '${{ inputs.v }}' },
          { name: 'b', run: '${{ steps.a.outputs.x }}' },
        ],
      },
    };
    assert.equal(actionProblem(ok), undefined);
    assert.equal(actionProblem({ name: 'x', spec: { steps: [] } }), 'Action "x" must contain at least one step');
    assert.equal(
      actionProblem({ name: 'x', spec: { steps: [{ name: 'a', uses: 'y' }] } }),
      'Action "x" step "a" must set run and may not use another Action',
    );
    assert.equal(
      actionProblem({
        name: 'x',
        spec: {
          steps: [
            { name: 'a', run: 'x' },
            { name: 'a', run: 'y' },
          ],
        },
      }),
      'Action "x" step name "a" is duplicated',
    );
    assert.equal(
      actionProblem({
        name: 'x',
        spec: {
          steps: [
            { name: 'a', run: '${{ steps.b.outputs.x }}' },
            { name: 'b', run: 'y' },
          ],
        },
      }),
      'actions.x.steps[0].run: steps.b does not name an earlier step of Action x (none available)',
    );
  });
});
