import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { ApiError } from '../../lib/kube/errors.ts';
import { assignedPod, gonePod, HttpError, relayRecords, type RunObj } from './handler.ts';
import { LineSplitter, MAX_LINE_BYTES } from './records.ts';

const run = (status?: RunObj['status']): RunObj => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'Run',
  metadata: { name: 'a', namespace: 'ns' },
  ...(status ? { status } : {}),
});
const apiError = (code: number, message: string): ApiError => new ApiError(code, { code, message }, message);

describe('logs: status codes (409 only for a gone Runtime Pod)', () => {
  it('an unassigned Run is 400 BadRequest "is waiting to start", never 409', () => {
    for (const r of [run(), run({ phase: 'Pending' })]) {
      assert.throws(
        () => assignedPod(r, 'ns', 'a'),
        (e: unknown) =>
          e instanceof HttpError &&
          e.code === 400 &&
          e.reason === 'BadRequest' &&
          /^Run ns\/a is waiting to start: not assigned to a Runtime Pod yet \(phase Pending\)/.test(e.message),
      );
    }
  });

  it('an assigned Run reads its Runtime Pod', () => {
    assert.equal(assignedPod(run({ phase: 'Running', assignedPod: 'rt-1' }), 'ns', 'a'), 'rt-1');
  });

  it('a Pod log read answered 404 (Pod gone) is 409 Conflict', () => {
    const e = gonePod(apiError(404, 'pods "rt-1" not found'), 'ns', 'a', 'rt-1');
    assert.ok(e instanceof HttpError);
    assert.deepEqual([e.code, e.reason], [409, 'Conflict']);
    assert.match(e.message, /Runtime Pod rt-1 that ran Run ns\/a no longer exists/);
  });

  it('a Pod log read answered 400 (container waiting) stays 400, retryable', () => {
    const k8s = 'container "runtimed" in pod "rt-1" is waiting to start: ContainerCreating';
    const e = gonePod(apiError(400, k8s), 'ns', 'a', 'rt-1');
    assert.ok(e instanceof HttpError);
    assert.deepEqual([e.code, e.reason], [400, 'BadRequest']);
    assert.match(e.message, /is waiting to start/);
  });

  it('other failures pass through unchanged', () => {
    const err = apiError(500, 'etcd timeout');
    assert.equal(gonePod(err, 'ns', 'a', 'rt-1'), err);
  });
});

describe('logs: following holds a bounded partial line', () => {
  const rec = (seq: number): string =>
    JSON.stringify({ run_uid: 'u', attempt: 1, seq, stream: 'stdout', time: '2026-01-01T00:00:00Z', message: 'm' });

  it('drops a line longer than MAX_LINE_BYTES instead of buffering it, and relays the records after it', async () => {
    const upstream = new PassThrough();
    const out: string[] = [];
    const res = new Writable({
      write(chunk: Buffer, _enc, cb) {
        out.push(chunk.toString('utf8'));
        cb();
      },
    });
    const state = relayRecords(upstream, res, 'u', undefined);
    upstream.write(`${rec(1)}\n{"run_uid":"u","message":"`);
    let maxHeld = 0;
    for (let i = 0; i < 12; i++) {
      upstream.write('y'.repeat(MAX_LINE_BYTES / 8));
      await new Promise((r) => setImmediate(r));
      maxHeld = Math.max(maxHeld, state.buffered());
    }
    upstream.write(`"}\n${rec(2)}\n`);
    await new Promise((r) => setImmediate(r));
    assert.ok(maxHeld <= MAX_LINE_BYTES, `held ${maxHeld} characters of one line`);
    assert.deepEqual(
      out.map((l) => (JSON.parse(l) as { seq: number }).seq),
      [1, 2],
    );
  });

  it('LineSplitter keeps short lines whole across chunks and bounds what it holds', () => {
    const s = new LineSplitter(10);
    assert.deepEqual(s.push('ab'), []);
    assert.deepEqual(s.push('c\nde'), ['abc']);
    assert.deepEqual(s.push('x'.repeat(20)), []);
    assert.equal(s.held, 0);
    assert.deepEqual(s.push('yy\nok\ntail'), ['ok']);
    assert.equal(s.end(), 'tail');
  });
});
