import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  ArtifactError,
  collectArtifacts,
  isValidArtifactPath,
  parseArtifactSource,
  resolveStepArtifacts,
  validateArtifactImports,
  type ArtifactRef,
  type JobsSpec,
  type JobStatus,
  type StepSpec,
} from './core.ts';

const ref = (name: string, path = `runs/u/artifacts/${name}`): ArtifactRef => ({
  name,
  driver: 'filesystem',
  type: 'file',
  location: { filesystem: { path } },
  sizeBytes: 1,
  createdAt: '2026-07-06T12:00:00Z',
});
const step = (artifacts: StepSpec['artifacts'], extra: Partial<StepSpec> = {}): StepSpec => ({
  name: 'verify',
  run: 'ls',
  artifacts,
  ...extra,
});
const jobs = (s: StepSpec, needs = ['build']): JobsSpec => ({
  build: { 'runs-on': 'bash', steps: [{ name: 'package', run: 'make' }] },
  'build.artifacts.x': { 'runs-on': 'bash', steps: [{ name: 'p', run: 'make' }] },
  lint: { 'runs-on': 'bash', steps: [{ name: 'l', run: 'make' }] },
  deploy: { 'runs-on': 'bash', needs, steps: [s] },
});

function artifactError(fn: () => unknown, code: string, message: string | RegExp): void {
  assert.throws(
    fn,
    (e: unknown) =>
      e instanceof ArtifactError &&
      e.code === code &&
      (typeof message === 'string' ? e.message === message : message.test(e.message)),
  );
}

describe('workflow-core artifacts: sources and paths', () => {
  it('parses jobs.<job>.artifacts.<name>, names may contain dots', () => {
    assert.deepEqual(parseArtifactSource('jobs.build.artifacts.dist.tgz'), { job: 'build', artifact: 'dist.tgz' });
    assert.deepEqual(parseArtifactSource('jobs.build.artifacts.x.artifacts.y'), {
      job: 'build',
      artifact: 'x.artifacts.y',
    });
    assert.deepEqual(parseArtifactSource('jobs.build.artifacts.x.artifacts.y', ['build.artifacts.x']), {
      job: 'build.artifacts.x',
      artifact: 'y',
    });
    artifactError(
      () => parseArtifactSource('build.dist.tgz'),
      'invalid-source',
      'artifact source "build.dist.tgz" must have the form jobs.<job>.artifacts.<name>',
    );
    artifactError(() => parseArtifactSource('jobs.build.artifacts.'), 'invalid-source', /must have the form/);
    artifactError(() => parseArtifactSource('jobs.build.artifacts.a/b'), 'invalid-source', /must have the form/);
  });

  it('validates destination paths like the CRD', () => {
    for (const ok of ['dist.tgz', 'a/b/c', '.hidden', './x', 'a/..b', '..x'])
      assert.equal(isValidArtifactPath(ok), true, ok);
    for (const bad of ['', '/abs', '../x', 'a/../b', 'a/..', '..']) assert.equal(isValidArtifactPath(bad), false, bad);
  });

  it('never accepts a path with a .. segment or a leading slash', () => {
    fc.assert(
      fc.property(
        fc
          .array(fc.constantFrom('a', '.', '..', '', 'b.c', '..d'), { minLength: 1, maxLength: 5 })
          .map((s) => s.join('/')),
        (p) => {
          if (isValidArtifactPath(p)) {
            assert.ok(!p.startsWith('/'));
            assert.ok(!p.split('/').includes('..'), p);
          }
        },
      ),
    );
  });
});

describe('workflow-core artifacts: static validation', () => {
  it('requires the producer to be a direct need, naming both jobs', () => {
    artifactError(
      () => validateArtifactImports(jobs(step([{ from: 'jobs.lint.artifacts.r', path: 'r' }]))),
      'not-a-need',
      'step "verify" in job "deploy" imports artifact "r" from job "lint", but "lint" is not in the needs of job "deploy"',
    );
    artifactError(
      () => validateArtifactImports(jobs(step([{ from: 'jobs.nope.artifacts.r', path: 'r' }]))),
      'unknown-job',
      'step "verify" in job "deploy" imports artifact "r" from unknown job "nope"',
    );
    artifactError(
      () => validateArtifactImports(jobs(step([{ from: 'jobs.deploy.artifacts.r', path: 'r' }]))),
      'not-a-need',
      /from its own job/,
    );
  });

  it('rejects bad and duplicate destinations and Action steps', () => {
    artifactError(
      () => validateArtifactImports(jobs(step([{ from: 'jobs.build.artifacts.a', path: '../a' }]))),
      'invalid-path',
      /must be a relative path without '\.\.' segments/,
    );
    artifactError(
      () =>
        validateArtifactImports(
          jobs(
            step([
              { from: 'jobs.build.artifacts.a', path: 'x' },
              { from: 'jobs.build.artifacts.b', path: './x/' },
            ]),
          ),
        ),
      'duplicate-path',
      'step "verify" in job "deploy": artifact destinations "x" and "./x/" are the same path',
    );
    artifactError(
      () =>
        validateArtifactImports(
          jobs(step([{ from: 'jobs.build.artifacts.a', path: 'a' }], { run: undefined, uses: 'act' })),
        ),
      'not-a-run-step',
      'step "verify" in job "deploy": artifacts can only be set on run steps',
    );
  });
});

describe('workflow-core artifacts: resolution', () => {
  const s = step([
    { from: 'jobs.build.artifacts.dist.tgz', path: 'in/dist.tgz' },
    { from: 'jobs.build.artifacts.report', path: 'report' },
  ]);

  it('resolves to Run.spec.artifactInputs in declaration order', () => {
    const statuses: Record<string, JobStatus> = {
      build: { phase: 'Succeeded', artifacts: { 'dist.tgz': ref('dist.tgz'), report: ref('report') } },
    };
    assert.deepEqual(resolveStepArtifacts(jobs(s), 'deploy', s, statuses), {
      kind: 'resolved',
      inputs: [
        { artifactRef: ref('dist.tgz'), path: 'in/dist.tgz' },
        { artifactRef: ref('report'), path: 'report' },
      ],
    });
    assert.deepEqual(resolveStepArtifacts(jobs(step([])), 'deploy', step([]), statuses), {
      kind: 'resolved',
      inputs: [],
    });
  });

  it('fails deterministically when the producer succeeded without the artifact', () => {
    const r = resolveStepArtifacts(jobs(s), 'deploy', s, {
      build: { phase: 'Succeeded', artifacts: { 'dist.tgz': ref('dist.tgz'), other: ref('other') } },
    });
    assert.equal(r.kind, 'fail');
    assert.equal(
      r.kind === 'fail' && r.error.message,
      'artifact "report" of job "build" does not exist: job "build" succeeded without producing it (produced: dist.tgz, other)',
    );
  });

  it('fails when the producer did not succeed and waits while it runs', () => {
    const failed = resolveStepArtifacts(jobs(s), 'deploy', s, { build: { phase: 'Failed' } });
    assert.equal(
      failed.kind === 'fail' && failed.error.message,
      'artifact "dist.tgz" of job "build" is unavailable: job "build" did not succeed (result: failure)',
    );
    assert.deepEqual(resolveStepArtifacts(jobs(s), 'deploy', s, { build: { phase: 'Running' } }), {
      kind: 'wait',
      message: 'waiting for job "build" to finish before importing artifact "dist.tgz"',
    });
  });

  it('resolves matrix producers when exactly one combination produced the name', () => {
    const one = step([{ from: 'jobs.build.artifacts.linux.tgz', path: 'l' }]);
    const combos = (a: Record<string, ArtifactRef>, b: Record<string, ArtifactRef>): JobStatus => ({
      phase: 'Succeeded',
      combinations: [
        { id: 'linux', name: 'build (linux)', index: 0, matrix: { os: 'linux' }, phase: 'Succeeded', artifacts: a },
        { id: 'mac', name: 'build (mac)', index: 1, matrix: { os: 'mac' }, phase: 'Succeeded', artifacts: b },
      ],
    });
    const ok = resolveStepArtifacts(jobs(one), 'deploy', one, {
      build: combos({ 'linux.tgz': ref('linux.tgz') }, { 'mac.tgz': ref('mac.tgz') }),
    });
    assert.deepEqual(ok, { kind: 'resolved', inputs: [{ artifactRef: ref('linux.tgz'), path: 'l' }] });
    const dup = resolveStepArtifacts(jobs(one), 'deploy', one, {
      build: combos({ 'linux.tgz': ref('linux.tgz', 'a') }, { 'linux.tgz': ref('linux.tgz', 'b') }),
    });
    assert.equal(dup.kind === 'fail' && dup.error.code, 'ambiguous');
    assert.match(
      dup.kind === 'fail' ? dup.error.message : '',
      /produced by several matrix combinations \(linux, mac\)/,
    );
  });

  it('keeps the latest successful ref per name', () => {
    assert.deepEqual(
      collectArtifacts([
        { succeeded: true, artifactRefs: [ref('a', 'first'), ref('b')] },
        { succeeded: false, artifactRefs: [ref('a', 'failed-run')] },
        { succeeded: true, artifactRefs: [ref('a', 'second')] },
      ]),
      { a: ref('a', 'second'), b: ref('b') },
    );
  });
});
