import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  after,
  decodeCursor,
  encodeCursor,
  followDone,
  parseEnd,
  parseRecord,
  parseTail,
  QUIET_MS,
  RecordTail,
  MAX_LINE_BYTES,
  runRecords,
  snapshot,
  MAX_TAIL,
  type LogRecord,
} from './records.ts';

const line = (uid: string, attempt: number, seq: number, message: string): string =>
  JSON.stringify({
    time: 't',
    run_uid: uid,
    run_name: 'n',
    namespace: 'ns',
    runtime: 'bash',
    pod: 'p',
    stream: 'stdout',
    message,
    attempt,
    seq,
  });

describe('run log records', () => {
  it("keeps only the Run's records, in order, each once", () => {
    const text = [
      line('A', 1, 0, 'a0'),
      line('B', 1, 0, 'b0'),
      '{"level":30,"msg":"runtimed ready"}',
      line('A', 1, 1, 'a1'),
      line('A', 1, 0, 'a0'),
      line('A', 1, 1, 'a1'),
      line('A', 2, 0, 'retry'),
      'garbage',
    ].join('\n');
    assert.deepEqual(
      runRecords(text, 'A').map((r) => r.message),
      ['a0', 'a1', 'retry'],
    );
    assert.deepEqual(
      runRecords(text, 'B').map((r) => r.message),
      ['b0'],
    );
  });

  it('cursors are opaque, round-trip, and resume strictly after the record', () => {
    fc.assert(
      fc.property(fc.nat(1000), fc.nat(100000), (attempt, seq) => {
        const c = encodeCursor({ attempt, seq });
        assert.deepEqual(decodeCursor(c), { attempt, seq });
        assert.ok(!after({ attempt, seq }, { attempt, seq }));
        assert.ok(after({ attempt, seq: seq + 1 }, { attempt, seq }));
        assert.ok(after({ attempt: attempt + 1, seq: 0 }, { attempt, seq }));
      }),
    );
    assert.equal(decodeCursor('bm9wZQ'), undefined);
  });

  it('delivers every record exactly once across any sequence of reconnects', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(20), { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 60 }), (cuts, n) => {
        const lines = Array.from({ length: n }, (_, i) => line('R', 1 + Math.floor(i / 25), i % 25, `m${i}`));
        const seen: string[] = [];
        let cursor: string | undefined;
        let visible = 0;
        for (const step of cuts) {
          visible = Math.min(n, visible + step);
          const recs = runRecords(lines.slice(0, visible).join('\n'), 'R', cursor ? decodeCursor(cursor) : undefined);
          const take = recs.slice(0, Math.max(1, Math.floor(recs.length / 2)));
          seen.push(...take.map((r) => r.message));
          const last = take[take.length - 1];
          if (last) cursor = encodeCursor(last);
        }
        const rest = runRecords(lines.join('\n'), 'R', cursor ? decodeCursor(cursor) : undefined);
        seen.push(...rest.map((r) => r.message));
        assert.deepEqual(
          seen,
          lines.map((_, i) => `m${i}`),
        );
      }),
    );
  });

  it('bounds snapshots by tailLines (default 100, max 500) and 1 MiB', () => {
    assert.equal(parseTail(undefined), 100);
    assert.equal(parseTail('9999'), MAX_TAIL);
    assert.match(String(parseTail('-1')), /non-negative integer/);
    const recs: LogRecord[] = Array.from({ length: 50 }, (_, i) => ({
      time: 't',
      stream: 'stdout',
      message: 'x'.repeat(1000),
      attempt: 1,
      seq: i,
    }));
    const s = snapshot(recs, 50, 10_000);
    assert.ok(Buffer.byteLength(JSON.stringify({ items: s.items })) <= 10_000);
    assert.equal(s.items[s.items.length - 1]?.seq, 49, 'the newest records are kept');
    assert.deepEqual(decodeCursor(s.cursor ?? ''), { attempt: 1, seq: 49 });
  });
});

describe('end of a followed Run log', () => {
  const endLine = (uid: string, attempt: number): string =>
    JSON.stringify({ time: 't', run_uid: uid, run_name: 'n', namespace: 'ns', end: true, attempt });

  it("reads runtimed's end-of-log marker of an attempt, for this Run only, and never as an output record", () => {
    assert.equal(parseEnd(endLine('u1', 2), 'u1'), 2);
    assert.equal(parseEnd(endLine('u2', 2), 'u1'), undefined);
    assert.equal(parseEnd(line('u1', 1, 0, 'x'), 'u1'), undefined);
    assert.equal(parseRecord(endLine('u1', 1), 'u1'), undefined);
    assert.deepEqual(runRecords([line('u1', 1, 0, 'a'), endLine('u1', 1)].join('\n'), 'u1').length, 1);
  });

  it("ends a follow only after the final attempt's marker, or a quiet period while reading", () => {
    const base = { terminalAttempt: 2, endedAttempt: 2, quietMs: 0, paused: false };
    assert.equal(followDone({ ...base, terminalAttempt: undefined }), false, 'a running Run is followed on');
    assert.equal(followDone(base), true, 'the final attempt ended and the Run is terminal');
    assert.equal(followDone({ ...base, endedAttempt: 1 }), false, "an earlier attempt's marker is not the end");
    assert.equal(followDone({ ...base, endedAttempt: 1, quietMs: QUIET_MS }), true, 'no marker: quiet period');
    assert.equal(
      followDone({ ...base, endedAttempt: 1, quietMs: QUIET_MS * 10, paused: true }),
      false,
      'a stream paused for a slow reader is not quiet',
    );
  });
});

describe('run log snapshots are streamed (issue 11 item 8)', () => {
  const chunked = (text: string, cuts: number[]): string[] => {
    const out: string[] = [];
    let at = 0;
    for (const c of [...cuts].sort((a, b) => a - b)) {
      out.push(text.slice(at, Math.max(at, c)));
      at = Math.max(at, c);
    }
    out.push(text.slice(at));
    return out;
  };

  it('gives the same snapshot as reading the whole log, whatever the chunking', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ uid: fc.constantFrom('u', 'v'), seq: fc.nat(20), msg: fc.string({ maxLength: 40 }) })),
        fc.array(fc.nat(4000)),
        fc.nat(30),
        fc.option(fc.nat(10), { nil: undefined }),
        fc.integer({ min: 200, max: 4000 }),
        (recs, cuts, tail, cursorSeq, maxBytes) => {
          const text = recs.map((r) => line(r.uid, 1, r.seq, r.msg)).join('\n');
          const cursor = cursorSeq === undefined ? undefined : { attempt: 1, seq: cursorSeq };
          const t = new RecordTail('u', tail, cursor, maxBytes);
          for (const c of chunked(text, cuts)) t.write(c);
          assert.deepEqual(t.end(), snapshot(runRecords(text, 'u', cursor), tail, maxBytes));
        },
      ),
    );
  });

  it('holds at most tail records however long the log is, and skips over-long lines', () => {
    const t = new RecordTail('u', 5);
    for (let i = 0; i < 20_000; i++) {
      t.write(`${line('u', 1, i, 'x')}\n`);
      assert.ok(t.kept <= 5);
    }
    t.write('{"run_uid":"u","message":"');
    for (let i = 0; i < 9; i++) t.write('y'.repeat(MAX_LINE_BYTES / 8));
    t.write(`"}\n${line('u', 1, 20_000, 'after')}\n`);
    const snap = t.end();
    assert.deepEqual(
      snap.items.map((r) => r.seq),
      [19_996, 19_997, 19_998, 19_999, 20_000],
    );
  });
});
