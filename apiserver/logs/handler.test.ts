import assert from 'node:assert/strict';
import { PassThrough, Readable, Writable } from 'node:stream';
import { ApiError } from '../../lib/kube/errors.ts';
import {
  assignedPod,
  gonePod,
  HttpError,
  loadRun,
  readSnapshot,
  relayRecords,
  windowLines,
  type OpenLog,
  type RunObj,
} from './handler.ts';
import { encodeCursor, LineSplitter, MAX_LINE_BYTES, tailWindowSuffices } from './records.ts';

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

describe('logs: a snapshot reads the end of the Pod log, and the Run from the cache', () => {
  const rec = (uid: string, seq: number): string =>
    JSON.stringify({
      run_uid: uid,
      attempt: 1,
      seq,
      stream: 'stdout',
      time: '2026-01-01T00:00:00Z',
      message: `m${seq}`,
    });
  const lines = (uid: string, from: number, n: number): string[] =>
    Array.from({ length: n }, (_, i) => rec(uid, from + i));
  const finished: RunObj = {
    metadata: { name: 'a', namespace: 'ns', uid: 'u', creationTimestamp: '2026-01-01T00:00:00Z' },
    status: { phase: 'Succeeded', assignedPod: 'rt-1' },
  };
  /** A Pod log served like pods/log: tailLines gives the last lines; records each read's query. */
  const podLog = (text: string[]): { open: OpenLog; reads: string[] } => {
    const reads: string[] = [];
    const open: OpenLog = (path) => {
      reads.push(path);
      const tail = /[?&]tailLines=(\d+)/.exec(path)?.[1];
      const served = tail === undefined ? text : text.slice(-Number(tail));
      return Promise.resolve(Readable.from([served.map((l) => `${l}\n`).join('')]));
    };
    return { open, reads };
  };
  const seqs = (s: { items: unknown[] }): number[] => s.items.map((r) => (r as { seq: number }).seq);

  it('a Run whose records end the log is read once, from the end (tailLines), not since its creation', async () => {
    const log = podLog(['runtimed started', ...lines('u', 1, 1000)]);
    const snap = await readSnapshot(log.open, finished, 'rt-1', 100);
    assert.deepEqual(
      seqs(snap),
      Array.from({ length: 100 }, (_, i) => 901 + i),
    );
    assert.equal(log.reads.length, 1);
    assert.match(log.reads[0] ?? '', new RegExp(`&tailLines=${windowLines(100)}$`));
    assert.equal(snap.cursor, encodeCursor({ attempt: 1, seq: 1000 }));
  });

  it('a Run whose records are further back than the window is read again since its creation, with the same answer', async () => {
    const log = podLog([...lines('u', 1, 300), ...lines('other', 1, 1000)]);
    const snap = await readSnapshot(log.open, finished, 'rt-1', 100);
    assert.deepEqual(
      seqs(snap),
      Array.from({ length: 100 }, (_, i) => 201 + i),
    );
    assert.equal(log.reads.length, 2);
    assert.doesNotMatch(log.reads[1] ?? '', /tailLines/);
    assert.equal(snap.cursor, encodeCursor({ attempt: 1, seq: 300 }));
  });

  it('a window holding the first record of the Run holds all of it: read once', async () => {
    const log = podLog([...lines('other', 0, 500), ...lines('u', 0, 30), ...lines('other', 500, 20)]);
    const snap = await readSnapshot(log.open, finished, 'rt-1', 100);
    assert.deepEqual(
      seqs(snap),
      Array.from({ length: 30 }, (_, i) => i),
    );
    assert.equal(log.reads.length, 1);
  });

  it('a short window without the first record of the Run is read again in full (a kubelet counts partial lines)', async () => {
    const log = podLog([...lines('u', 0, 30), ...lines('other', 0, 100)]);
    const short: OpenLog = (path) => log.open(path.replace(/tailLines=\d+/, 'tailLines=120'));
    const snap = await readSnapshot(short, finished, 'rt-1', 100);
    assert.deepEqual(
      seqs(snap),
      Array.from({ length: 30 }, (_, i) => i),
    );
    assert.equal(log.reads.length, 2);
  });

  it('a cursor reads the whole log since the Run was created', async () => {
    const log = podLog(lines('u', 1, 1000));
    const snap = await readSnapshot(log.open, finished, 'rt-1', 100, { attempt: 1, seq: 950 });
    assert.deepEqual(
      seqs(snap),
      Array.from({ length: 50 }, (_, i) => 951 + i),
    );
    assert.equal(log.reads.length, 1);
    assert.doesNotMatch(log.reads[0] ?? '', /tailLines/);
  });

  it('tailWindowSuffices: enough of the Run records in the window, or its first record', () => {
    assert.equal(tailWindowSuffices({ recordsRead: 100, tail: 100, sawStart: false }), true);
    assert.equal(tailWindowSuffices({ recordsRead: 99, tail: 100, sawStart: false }), false);
    assert.equal(tailWindowSuffices({ recordsRead: 30, tail: 100, sawStart: true }), true);
    // tail 0 still needs the newest record (it gives the cursor).
    assert.equal(tailWindowSuffices({ recordsRead: 0, tail: 0, sawStart: false }), false);
    assert.equal(tailWindowSuffices({ recordsRead: 1, tail: 0, sawStart: false }), true);
  });

  const noGet = {
    get: (): Promise<never> => Promise.reject(new Error('the Run was read from the API server')),
  };

  it('an assigned Run in the informer cache is used without a GET', async () => {
    const got = await loadRun(noGet, 'ns', 'a', (ns, name) => (ns === 'ns' && name === 'a' ? finished : undefined));
    assert.deepEqual(got, { run: finished, pod: 'rt-1' });
  });

  it('an unassigned cached Run is read from the API server (its binding may not be cached yet)', async () => {
    const live: RunObj = { ...finished, status: { phase: 'Running', assignedPod: 'rt-2' } };
    const reads: string[] = [];
    const client = {
      get: <T>(path: string): Promise<T> => {
        reads.push(path);
        return Promise.resolve(live as T);
      },
    };
    const got = await loadRun(client, 'ns', 'a', () => ({ ...finished, status: { phase: 'Pending' } }));
    assert.equal(got.pod, 'rt-2');
    assert.deepEqual(reads, ['/apis/kruntimes.io/v1alpha1/namespaces/ns/runs/a']);
  });
});
