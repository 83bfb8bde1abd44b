import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import {
  childRunLabels,
  childRunName,
  childWorkflowRunName,
  isDnsSubdomain,
  isLabelValue,
  jobWorkspaceName,
  namePrefix,
  snapshotName,
  stepRefFromLabels,
  type StepRef,
} from './core.ts';

const sha10 = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 10);

describe('workflow-core names', () => {
  it('matches upstream names for short WorkflowRun names without matrix', () => {
    assert.equal(childRunName('ci-run-1', { job: 'build', step: 'test' }), `ci-run-1-${sha10('build/test/')}`);
    assert.equal(
      childRunName('ci-run-1', { job: 'build', step: 'setup', actionStep: 'install' }),
      `ci-run-1-${sha10('build/setup/install')}`,
    );
    assert.equal(childWorkflowRunName('release', 'deploy'), `release-${sha10('deploy')}`);
    assert.equal(snapshotName('release', 'uid-1'), `release-snapshot-${sha10('uid-1')}`);
  });

  it('keeps names ≤63 and hashes the full parent in when truncating', () => {
    const long = `${'a'.repeat(60)}.b-c`;
    const n = childRunName(long, { job: 'build', step: 'test' });
    assert.equal(n.length, 63);
    assert.ok(n.startsWith('a'.repeat(52)));
    assert.notEqual(n, childRunName(`${'a'.repeat(60)}.b-d`, { job: 'build', step: 'test' }));
  });

  it('distinguishes matrix combinations, steps, action steps and kinds of children', () => {
    const names = new Set([
      childRunName('w', { job: 'j', step: 's' }),
      childRunName('w', { job: 'j', combination: 'a', step: 's' }),
      childRunName('w', { job: 'j', combination: 'b', step: 's' }),
      childRunName('w', { job: 'j', step: 's', actionStep: 'x' }),
      childWorkflowRunName('w', 'j'),
      childWorkflowRunName('w', 'j', 'a'),
      jobWorkspaceName('w', 'j'),
      jobWorkspaceName('w', 'j', 'a'),
    ]);
    assert.equal(names.size, 8);
  });

  it('cleans prefixes that are not DNS names', () => {
    assert.equal(namePrefix('My_Run..x-', 63), 'my-run.x');
    assert.equal(namePrefix('---', 63), '');
    assert.match(childRunName('---', { job: 'j', step: 's' }), /^[0-9a-f]{10}$/);
    assert.ok(isDnsSubdomain(childRunName('UPPER_case.-x', { job: 'j', step: 's' }), 63));
  });

  it('round-trips identity through labels', () => {
    const ref: StepRef = { job: 'build', combination: '18-linux', step: 'setup', actionStep: 'install' };
    assert.deepEqual(stepRefFromLabels(childRunLabels('uid-1', ref)), ref);
    assert.deepEqual(stepRefFromLabels(childRunLabels('uid-1', { job: 'a', step: 'b' })), { job: 'a', step: 'b' });
    assert.equal(stepRefFromLabels({ app: 'x' }), undefined);
  });
});

// Realistic inputs: WorkflowRun names are DNS subdomains (≤253), job/step names label values.
const dnsSeg = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
const wfrName = fc
  .array(dnsSeg, { minLength: 1, maxLength: 12 })
  .map((s) => s.join('.').slice(0, 253))
  .filter((s) => isDnsSubdomain(s));
const labelName = fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?$/);
const refArb: fc.Arbitrary<StepRef> = fc
  .record({
    job: labelName,
    step: labelName,
    combination: fc.option(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/), { nil: undefined }),
    actionStep: fc.option(labelName, { nil: undefined }),
  })
  .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as unknown as StepRef);

describe('workflow-core names (properties)', () => {
  it('child names are DNS subdomains and label values of at most 63 characters', () => {
    fc.assert(
      fc.property(wfrName, refArb, fc.uuid(), (w, ref, uid) => {
        for (const n of [
          childRunName(w, ref),
          childWorkflowRunName(w, ref.job, ref.combination),
          jobWorkspaceName(w, ref.job, ref.combination),
          snapshotName(w, uid),
        ]) {
          assert.ok(n.length <= 63, n);
          assert.ok(isDnsSubdomain(n), n);
          assert.ok(isLabelValue(n), n);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('are deterministic and injective on distinct (WorkflowRun, step) keys', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(wfrName, refArb), {
          minLength: 2,
          maxLength: 40,
          selector: ([w, r]) => JSON.stringify([w, r.job, r.combination, r.step, r.actionStep]),
        }),
        (keys) => {
          const names = keys.map(([w, r]) => childRunName(w, r));
          assert.equal(new Set(names).size, names.length);
          assert.deepEqual(
            keys.map(([w, r]) => childRunName(w, { ...r })),
            names,
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it('stay injective for WorkflowRuns sharing a long prefix', () => {
    fc.assert(
      fc.property(fc.uniqueArray(dnsSeg, { minLength: 2, maxLength: 20 }), refArb, (tails, ref) => {
        const names = tails.map((t) => childRunName(`${'x'.repeat(70)}.${t}`, ref));
        assert.equal(new Set(names).size, names.length);
      }),
    );
  });
});
