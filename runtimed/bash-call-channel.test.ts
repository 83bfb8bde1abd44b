import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { BashCallChannel, workerEnd } from './bash-call-channel.ts';
import { CALL_HEADER_BYTES, callToken } from './runtime-server/bash-calls.ts';
import { FUNCTION_IO_LIMIT } from './runtime-server/function-base.ts';
import type { InvokeResult } from './runtime-server/functions.ts';

const SECRET = 'a'.repeat(32);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A BashCallChannel on an in-memory connection: what it writes, and a way to answer as the worker would. */
function channel(): {
  ch: BashCallChannel;
  sock: Duplex;
  sent: Buffer[];
  hooks: { killed: number; stderrAsked: number };
  token: (i: number) => string;
} {
  const sent: Buffer[] = [];
  const sock = new Duplex({
    read() {},
    write(c: Buffer, _e, cb) {
      sent.push(c);
      cb();
    },
  });
  const hooks = { killed: 0, stderrAsked: 0 };
  const ch = new BashCallChannel(sock, Buffer.alloc(0), SECRET, {
    stderr: () => {
      hooks.stderrAsked++;
      return Promise.resolve('boom\n');
    },
    kill: () => {
      hooks.killed++;
      return Promise.resolve();
    },
  });
  return { ch, sock, sent, hooks, token: (i) => sent[i]?.subarray(0, 24).toString() ?? '' };
}

describe('runtimed bash call channel (a warm bash worker holds it, ADR 0029)', () => {
  it('frames a call as header and payload, returns the output up to its own end line; a second call is Busy', async () => {
    const { ch, sock, sent, token } = channel();
    const call = ch.call('{"s":"h\u00e9"}');
    assert.deepEqual(await ch.call('2'), { ok: false, reason: 'Busy', error: 'a call is already in flight' });
    const frame = sent[0]!;
    assert.equal(frame.subarray(24, CALL_HEADER_BYTES).toString(), ` ${'0'.repeat(13)}11`);
    assert.equal(frame.subarray(CALL_HEADER_BYTES).toString(), '{"s":"h\u00e9"}');
    // A stale end line of another token is output, not the end.
    sock.push(`{"x":1}\nffff 0\n`);
    sock.push(`\n${token(0)} 0\n`);
    assert.deepEqual(await call, { ok: true, output: '{"x":1}\nffff 0' });
  });

  it('a failed call carries the tail of its stderr, read from the Runtime Server', async () => {
    const { ch, sock, hooks, token } = channel();
    const call = ch.call('1');
    sock.push(`\n${token(0)} 3\n`);
    assert.deepEqual(await call, { ok: false, reason: 'FunctionError', error: 'exit status 3: boom' });
    assert.equal(hooks.stderrAsked, 1);
    const fenced = ch.call('1');
    sock.push(`\n${token(1)} fenced\n`);
    assert.deepEqual(await fenced, { ok: false, reason: 'NotRegistered', error: 'fenced: the execution lease lapsed' });
  });

  it("the Runtime Server's end-of-worker line ends the call (exit 0 keeps the output) and the channel", async () => {
    const { ch, sock } = channel();
    const call = ch.call('1');
    sock.push(`partial\n${SECRET} exit 0\n`);
    assert.deepEqual(await call, { ok: true, output: 'partial' });
    assert.equal(ch.open, false);
    const c2 = channel();
    const killed = c2.ch.call('1');
    c2.sock.push(`\n${SECRET} killed\n`);
    assert.deepEqual(await killed, { ok: false, reason: 'Cancelled', error: 'the call was cancelled' });
  });

  it('after an overflow the call ends only with its worker: a kill that lands late cannot hit the next call', async () => {
    const { ch, sock, hooks, token } = channel();
    const call = ch.call('1');
    let settled = false;
    void call.then(() => {
      settled = true;
    });
    sock.push(Buffer.alloc(FUNCTION_IO_LIMIT + 100, 'x'));
    // The function finished before the kill reached the Runtime Server.
    sock.push(`\n${token(0)} 0\n`);
    await sleep(20);
    assert.equal(hooks.killed, 1);
    assert.equal(settled, false);
    sock.push(`\n${SECRET} killed\n`);
    const r: InvokeResult = await call;
    assert.deepEqual(r, { ok: false, reason: 'OutputTooLarge', error: `output exceeds ${FUNCTION_IO_LIMIT} bytes` });
    assert.equal(ch.open, false);
  });

  it('the connection closing during a call is Cancelled', async () => {
    const { ch, sock } = channel();
    const call = ch.call('1');
    sock.destroy();
    assert.deepEqual(await call, { ok: false, reason: 'Cancelled', error: 'the bash-worker ended during the call' });
  });

  it('answers a call that did not fail as its end line is read: no stderr asked, no promise waited for first', async () => {
    const { ch, sock, hooks, token } = channel();
    let answered: InvokeResult | undefined;
    void ch.call('1').then((r) => (answered = r));
    sock.emit('data', Buffer.from(`"out"\n${token(0)} 0\n`));
    // One promise later: the call's own promise settled in the data event, not after another.
    await Promise.resolve();
    assert.deepEqual(answered, { ok: true, output: 'out' });
    assert.equal(hooks.stderrAsked, 0);
  });

  it('reads the end-of-worker line', () => {
    const end = { output: 'o', status: 'exit 137', tooLarge: false };
    assert.deepEqual(workerEnd(end), { end: { ...end, status: '137' }, killed: false });
    assert.deepEqual(workerEnd({ ...end, status: 'killed' }), { end: { ...end, status: '' }, killed: true });
    assert.deepEqual(workerEnd({ ...end, status: 'exit x' }), { end: { ...end, status: '' }, killed: false });
  });
});

describe('callToken', () => {
  it('gives 24 hex digits, a new token every call, across batches of the random pool', () => {
    const tokens = Array.from({ length: 1000 }, () => callToken());
    for (const t of tokens) assert.match(t, /^[0-9a-f]{24}$/);
    assert.equal(new Set(tokens).size, tokens.length);
  });
});
