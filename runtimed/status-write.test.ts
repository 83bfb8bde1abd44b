import assert from 'node:assert/strict';
import { ApiError } from '../lib/kube/errors.ts';
import { writeRunStatus, type StatusWriteDeps } from './status-write.ts';
import type { Run } from './types.ts';

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });

function run(rv: string, status: Run['status']): Run {
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name: 'r', namespace: 'ns', uid: 'u', resourceVersion: rv },
    spec: { runtime: 'bash' },
    status,
  };
}

const scheduled = run('1', { phase: 'Scheduled', assignedPod: 'p', attempt: 1 });

/** An API server that is down for `outage` calls, then answers with the patched Run. */
function flaky(outage: number, errors: () => Error = refused): StatusWriteDeps & { calls: number } {
  const d = {
    calls: 0,
    patch: (r: Run, status: Run['status']) => {
      d.calls++;
      if (d.calls <= outage) return Promise.reject(errors());
      return Promise.resolve({ ...r, metadata: { ...r.metadata, resourceVersion: '2' }, status });
    },
    refetch: () => Promise.resolve(scheduled),
    mine: () => true,
    sleep: () => Promise.resolve(),
  };
  return d;
}

describe('runtimed status writes through an API server outage (issue 18 soak: duplicated executions)', () => {
  it('writes a Run’s result once kube-apiserver answers again, instead of failing and leaving the Run Scheduled', async () => {
    const d = flaky(8);
    const a = { run: scheduled };
    const res = await writeRunStatus(d, a, (s) => ({ ...s, phase: 'Succeeded' }));
    assert.equal(res?.status?.phase, 'Succeeded');
    assert.equal(d.calls, 9);
    assert.equal(a.run.metadata.resourceVersion, '2');
  });

  it('waits out 503s ("paths not installed" while kube-apiserver starts) the same way', async () => {
    const d = flaky(
      3,
      () => new ApiError(503, undefined, 'the request has been made before all known HTTP paths have been installed'),
    );
    const res = await writeRunStatus(d, { run: scheduled }, (s) => ({ ...s, phase: 'Succeeded' }));
    assert.equal(res?.status?.phase, 'Succeeded');
  });

  it('stops waiting when the Run was taken away meanwhile, and writes nothing', async () => {
    const a: { run: Run; lost?: boolean } = { run: scheduled };
    const d = flaky(1_000);
    d.sleep = () => {
      if (d.calls >= 3) a.lost = true;
      return Promise.resolve();
    };
    await assert.rejects(
      writeRunStatus(d, a, (s) => s),
      /ECONNREFUSED/,
    );
    assert.equal(d.calls, 3);
  });

  it('still ends on a definite answer: gone (undefined), invalid (thrown), taken away on conflict (undefined)', async () => {
    const gone = { ...flaky(0), patch: () => Promise.reject(new ApiError(404, undefined, 'gone')) };
    assert.equal(await writeRunStatus(gone, { run: scheduled }, (s) => s), undefined);
    const invalid = { ...flaky(0), patch: () => Promise.reject(new ApiError(422, undefined, 'invalid')) };
    await assert.rejects(
      writeRunStatus(invalid, { run: scheduled }, (s) => s),
      /invalid/,
    );
    const moved = run('3', { phase: 'Pending', attempt: 2 });
    const conflict = {
      ...flaky(0),
      patch: () => Promise.reject(new ApiError(409, undefined, 'conflict')),
      refetch: () => Promise.resolve(moved),
      mine: () => true,
    };
    const a: { run: Run; lost?: boolean } = { run: run('1', { phase: 'Running', assignedPod: 'p', attempt: 1 }) };
    assert.equal(await writeRunStatus(conflict, a, (s) => s), undefined);
    assert.equal(a.lost, true);
  });
});
