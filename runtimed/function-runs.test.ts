import assert from 'node:assert/strict';
import { UnsafePathError } from './artifacts/safe-dir.ts';
import type { RunStatus } from '../lib/run/phases.ts';
import {
  callDecision,
  FunctionRuns,
  registrationFailure,
  type FunctionActive,
  type FunctionHost,
} from './function-runs.ts';
import type { Run } from './types.ts';
import type { InvokeResult } from './runtime-server/functions.ts';
import { FunctionRegistrationError } from './runtime-client.ts';
import { PrepareError } from './source.ts';

describe('runtimed function Runs: call decisions and registration failures (issue 15)', () => {
  const fn = { uid: 'u1', ready: true, ended: false, busy: false };
  it('decides 200, 404 (unknown, other UID), 503 (not ready, ending) and 429 (busy)', () => {
    assert.equal(callDecision(fn, 'f', 'u1').code, 200);
    assert.equal(callDecision(undefined, 'f', 'u1').code, 404);
    const other = callDecision(fn, 'f', 'u0');
    assert.equal(other.code, 404);
    assert.match('message' in other ? other.message : '', /recreated/);
    assert.equal(callDecision({ ...fn, ready: false }, 'f', 'u1').code, 503);
    assert.equal(callDecision({ ...fn, ended: true }, 'f', 'u1').code, 503);
    assert.equal(callDecision({ ...fn, busy: true }, 'f', 'u1').code, 429);
  });

  it('registration errors are retryable; unsafe paths and bad inputs are terminal', () => {
    assert.deepEqual(registrationFailure(new FunctionRegistrationError('ModuleNotFoundError')), {
      reason: 'FunctionRegistration',
      message: 'ModuleNotFoundError',
      retryable: true,
    });
    assert.equal(registrationFailure(new PrepareError('git')).reason, 'PrepareSource');
    assert.equal(registrationFailure(new PrepareError('git')).retryable, true);
    assert.equal(registrationFailure(new UnsafePathError('x')).retryable, false);
    assert.equal(
      registrationFailure(Object.assign(new Error('m'), { reason: 'ArtifactInputInvalid' })).retryable,
      false,
    );
    assert.equal(registrationFailure(new Error('socket')).retryable, true);
  });
});

describe('runtimed function Runs: lifecycle with a fake Runtime Server and API (issue 15)', () => {
  interface Harness {
    fr: FunctionRuns;
    a: FunctionActive;
    writes: RunStatus[];
    log: string[];
  }

  function harness(
    spec: Partial<Run['spec']>,
    registerFailures = 0,
    callMs = 50,
    answer: () => InvokeResult = () => ({ ok: true, output: 1 }),
  ): Harness {
    const writes: RunStatus[] = [];
    const log: string[] = [];
    let finalizers: string[] = [];
    let failures = registerFailures;
    const run = {
      metadata: { name: 'f', namespace: 'n', uid: 'u1' },
      spec: { runtime: 'bash', mode: { function: { handler: 'h.f' } }, ...spec },
      status: { phase: 'Scheduled', assignedPod: 'p' },
    } as Run;
    const runtime = {
      registerFunction: () => {
        log.push('register');
        if (failures-- > 0) return Promise.reject(new FunctionRegistrationError('no function f'));
        return Promise.resolve();
      },
      invokeFunction: async () => {
        log.push('call');
        await new Promise((r) => setTimeout(r, callMs));
        log.push('call done');
        return answer();
      },
      cancelFunctionCall: () => Promise.resolve(log.push('cancel call')),
      unregisterFunction: () => Promise.resolve(log.push('unregister')),
    };
    const client = {
      get: () => Promise.resolve({ ...run, metadata: { ...run.metadata, finalizers, resourceVersion: '1' } }),
      patch: (_p: string, body: { metadata: { finalizers: string[] } }) => {
        finalizers = body.metadata.finalizers;
        log.push(`finalizers ${finalizers.join(',')}`);
        return Promise.resolve({});
      },
    };
    const host: FunctionHost = {
      d: { runtime, client, now: () => new Date(), cfg: { podName: 'p' } } as unknown as FunctionHost['d'],
      writeStatus: (a, build) => {
        const s = build(a.run.status ?? {});
        writes.push(s);
        a.run = { ...a.run, status: s };
        return Promise.resolve(a.run);
      },
      started: (a, s) => ({ ...s, startTime: s.startTime ?? a.startedAt, attempt: s.attempt || 1 }),
      stageFunction: () => Promise.resolve('/w'),
      release: () => Promise.resolve(void log.push('release')),
      event: () => undefined,
      endpointFor: () => ({ protocol: 'HTTPS', url: 'https://p/invoke' }),
      background: (_run, work) => void work.catch((err: unknown) => log.push(`failed: ${String(err)}`)),
    };
    const a: FunctionActive = { run, attempt: 1, startedAt: 't0', cancelling: false, workdir: '' };
    return { fr: new FunctionRuns(host), a, writes, log };
  }
  const last = (h: Harness): RunStatus | undefined => h.writes[h.writes.length - 1];
  const ready = (s: RunStatus | undefined): string | undefined =>
    s?.conditions?.find((c) => c.type === 'Ready')?.reason;

  it('retries a failed registration per the policy (attempt 2), then goes Ready with the endpoint and the finalizer', async () => {
    const h = harness({ retryPolicy: { maxAttempts: 2, backoff: '10ms' } }, 1);
    await h.fr.start(h.a);
    assert.deepEqual(
      h.writes.map((s) => [s.phase, s.attempt]),
      [
        ['Running', 1],
        ['Running', 2],
        ['Running', 2],
        ['Ready', 2],
      ],
    );
    assert.equal(ready(last(h)), 'FunctionRegistered');
    assert.equal(last(h)?.endpoint?.url, 'https://p/invoke');
    assert.deepEqual(h.log.slice(0, 3), ['finalizers kruntimes.io/function-cleanup', 'register', 'register']);
    await h.fr.end(h.a, 'Cancelled', 'bye');
  });

  it('fails after the last registration attempt: Failed, Ready=False, finalizer removed, released', async () => {
    const h = harness({}, 5);
    await h.fr.start(h.a);
    assert.equal(last(h)?.phase, 'Failed');
    assert.equal(ready(last(h)), 'FunctionRegistration');
    assert.equal(last(h)?.endpoint, null);
    assert.deepEqual(h.log.slice(-3), ['unregister', 'finalizers ', 'release']);
  });

  it('cancel with a call in flight: 429 for a second call, the call drains, then unregister and Cancelled', async () => {
    const h = harness({}, 0, 100);
    await h.fr.start(h.a);
    const t = h.fr.target(h.a, 'f', 'u1');
    assert.equal(t.code, 200);
    const call = t.code === 200 ? t.call('1') : Promise.resolve(undefined);
    assert.equal(h.fr.target(h.a, 'f', 'u1').code, 429);
    assert.equal(h.fr.target(h.a, 'f', 'u0').code, 404);
    await h.fr.end(h.a, 'Cancelled', 'cancelled by user');
    assert.deepEqual(await call, { ok: true, output: 1 });
    assert.ok(h.log.indexOf('call done') < h.log.indexOf('unregister'), h.log.join(' | '));
    assert.ok(!h.log.includes('cancel call'));
    assert.equal(last(h)?.phase, 'Cancelled');
    assert.equal(h.fr.target(h.a, 'f', 'u1').code, 503);
  });

  it('a call the Runtime Server answers NotRegistered (it dropped the handler): not Ready, registered again per the policy', async () => {
    let lost = true;
    const answer = (): InvokeResult => {
      if (!lost) return { ok: true, output: 1 };
      lost = false;
      return { ok: false, reason: 'NotRegistered', error: 'function u1 not registered' };
    };
    const h = harness({ retryPolicy: { maxAttempts: 2, backoff: '10ms' } }, 0, 1, answer);
    await h.fr.start(h.a);
    const t = h.fr.target(h.a, 'f', 'u1');
    assert.equal(t.code === 200 && (await t.call('1')).ok, false);
    assert.equal(h.fr.target(h.a, 'f', 'u1').code, 503, 'not ready while it registers again');
    for (let i = 0; i < 50 && last(h)?.phase !== 'Ready'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(
      h.writes.map((s) => [s.phase, s.attempt]),
      [
        ['Running', 1],
        ['Ready', 1],
        ['Running', 2],
        ['Running', 2],
        ['Ready', 2],
      ],
    );
    assert.equal(h.log.filter((l) => l === 'register').length, 2);
    const again = h.fr.target(h.a, 'f', 'u1');
    assert.deepEqual(again.code === 200 ? await again.call('1') : again, { ok: true, output: 1 });
    await h.fr.end(h.a, 'Cancelled', 'bye');
  });

  it('without attempts left, a lost registration ends the Run: Failed, reason FunctionLost', async () => {
    const h = harness({}, 0, 1, () => ({ ok: false, reason: 'NotRegistered', error: 'not registered' }));
    await h.fr.start(h.a);
    const t = h.fr.target(h.a, 'f', 'u1');
    if (t.code === 200) await t.call('1');
    for (let i = 0; i < 50 && last(h)?.phase === 'Ready'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(last(h)?.phase, 'Failed');
    assert.equal(ready(last(h)), 'FunctionLost');
  });

  it('ends after the idle timeout without calls: Timeout, reason IdleTimeout', async () => {
    const h = harness({ mode: { function: { handler: 'h.f', idleTimeoutSeconds: 1 } } });
    await h.fr.start(h.a);
    assert.equal(last(h)?.phase, 'Ready');
    for (let i = 0; i < 100 && last(h)?.phase === 'Ready'; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(last(h)?.phase, 'Timeout');
    assert.equal(ready(last(h)), 'IdleTimeout');
  });
});
