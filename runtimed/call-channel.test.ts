import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { oneLine } from './call-channel.ts';
import { FunctionRegistrationError } from './runtime-client.ts';
import { pairPerBlock, runtimePair } from './runtime-fixtures.ts';
import { lineSplitter } from './runtime-server/function-calls.ts';

describe('runtimed function call channel (issue 15)', () => {
  it('splits lines across chunks and reports an over-long line', () => {
    const lines: string[] = [];
    let over = 0;
    const feed = lineSplitter(
      8,
      (l) => lines.push(l),
      () => over++,
    );
    feed('ab');
    feed('c\nd\n\ne');
    feed('f\n');
    assert.deepEqual(lines, ['abc', 'd', '', 'ef']);
    feed('123456789');
    assert.equal(over, 1);
    assert.equal(oneLine('{"a":\n 1}'), '{"a":1}');
    assert.equal(oneLine('{"a":1}'), '{"a":1}');
  });

  describe('with a real Runtime Server', () => {
    const b = pairPerBlock('krt-calls-', 'bash', { 'h.sh': 'echo() { printf "%s" "$1"; }\n' });
    let taken = 0;
    before(() => {
      const take = b.pair.dial.take.bind(b.pair.dial);
      b.pair.dial.take = () => {
        taken++;
        return take();
      };
    });

    it('carries many calls over one upgraded connection, no HTTP request each; unregistered answers NotRegistered, a new registration is called again', async () => {
      const before = taken;
      await b.client.registerFunction({ id: 'f', handler: 'h.echo', workingDir: b.dir });
      let requests = 0;
      b.srv.server.on('request', () => requests++);
      for (let i = 0; i < 20; i++)
        assert.deepEqual(await b.client.invokeFunction('f', `{"i":\n${i}}`), { ok: true, output: { i } });
      assert.equal(taken - before - 1, 1); // the registration's request, then one connection, upgraded once
      assert.equal(requests, 0); // and no HTTP request per call
      await b.client.unregisterFunction('f');
      const r = await b.client.invokeFunction('f', '1');
      assert.equal(r.ok ? '' : r.reason, 'NotRegistered');
      await b.client.registerFunction({ id: 'f', handler: 'h.echo', workingDir: b.dir });
      assert.deepEqual(await b.client.invokeFunction('f', '"again"'), { ok: true, output: 'again' });
    });

    it('answers NotRegistered on a channel once the execution lease lapsed (fenced)', async () => {
      await b.client.renewLease(1);
      await new Promise((r) => setTimeout(r, 50));
      const r = await b.client.invokeFunction('f', '1');
      assert.deepEqual(r.ok ? '' : [r.reason, r.error], ['NotRegistered', 'fenced: the execution lease lapsed']);
    });
  });

  describe('bash: the channel held by the warm worker (ADR 0029)', () => {
    const b = pairPerBlock('krt-bashcalls-', 'bash', {
      'h.sh': 'echo() { printf "%s" "$1"; }\nlen() { printf "%s" "${#1}"; }\nslow() { sleep 30; }\nbye() { exit 0; }\n',
    });

    it('the worker answers runtimed itself: no call reaches the Runtime Server; payloads arrive whole', async () => {
      await b.client.registerFunction({ id: 'e', handler: 'h.echo', workingDir: b.dir });
      await b.client.registerFunction({ id: 'n', handler: 'h.len', workingDir: b.dir });
      const fns = [b.srv.functions.get('e')!, b.srv.functions.get('n')!];
      let throughServer = 0;
      for (const f of fns) {
        const invoke = f.invoke.bind(f);
        f.invoke = (payload) => (throughServer++, invoke(payload));
      }
      for (let i = 0; i < 20; i++)
        assert.deepEqual(await b.client.invokeFunction('e', `{"i":\n${i},"s":"h\u00e9 \u263a"}`), {
          ok: true,
          output: { i, s: 'h\u00e9 \u263a' },
        });
      // A payload near the 1 MiB limit, multi-byte characters included (the header counts bytes;
      // the worker's locale here is C, so ${#1} counts bytes too).
      const big = JSON.stringify('\u00e9'.repeat(400_000));
      assert.deepEqual(await b.client.invokeFunction('n', big), { ok: true, output: Buffer.byteLength(big) });
      assert.equal(b.client.callServer('e'), 'bash-worker');
      assert.equal(throughServer, 0);
    });

    it('a second call while one is in flight is Busy; cancelling the call ends it Cancelled, and the next call gets a new worker', async () => {
      await b.client.registerFunction({ id: 's', handler: 'h.slow', workingDir: b.dir });
      const call = b.client.invokeFunction('s', '1');
      await new Promise((r) => setTimeout(r, 100));
      const busy = await b.client.invokeFunction('s', '1');
      assert.equal(busy.ok ? '' : busy.reason, 'Busy');
      await b.client.cancelFunctionCall('s');
      assert.deepEqual(await call, { ok: false, reason: 'Cancelled', error: 'the call was cancelled' });
      await b.client.registerFunction({ id: 'e2', handler: 'h.echo', workingDir: b.dir });
      assert.deepEqual(await b.client.invokeFunction('e2', '"after"'), { ok: true, output: 'after' });
    });

    it("registration sources the file once, in the channel's worker, whose failure is the registration's error; a retry registers anew", async () => {
      const sub = join(b.dir, 'reg');
      mkdirSync(sub);
      const file = join(sub, 'h.sh');
      writeFileSync(file, 'echo sourced >> sourced.log\nf() { printf "%s" "$1"; }\n');
      await b.client.registerFunction({ id: 'once', handler: 'h.f', workingDir: sub });
      assert.equal(readFileSync(join(sub, 'sourced.log'), 'utf8'), 'sourced\n');
      assert.equal(b.client.callServer('once'), 'bash-worker');
      assert.deepEqual(await b.client.invokeFunction('once', '"x"'), { ok: true, output: 'x' });
      writeFileSync(file, 'echo sourced >> sourced.log\n');
      await assert.rejects(
        b.client.registerFunction({ id: 'none', handler: 'h.f', workingDir: sub }),
        (e: Error) => e instanceof FunctionRegistrationError && e.message === 'h defines no bash function "f"',
      );
      writeFileSync(file, 'echo sourced >> sourced.log\necho broken >&2\nreturn 2\n');
      await assert.rejects(
        b.client.registerFunction({ id: 'bad', handler: 'h.f', workingDir: sub }),
        (e: Error) => e instanceof FunctionRegistrationError && e.message === 'sourcing h failed: broken',
      );
      assert.equal(readFileSync(join(sub, 'sourced.log'), 'utf8'), 'sourced\n'.repeat(3));
      // Nothing is left registered by a failed registration: a retry after the fix checks the file again.
      assert.equal(b.srv.functions.get('bad'), undefined);
      writeFileSync(file, 'f() { printf "fixed"; }\n');
      await b.client.registerFunction({ id: 'bad', handler: 'h.f', workingDir: sub });
      assert.deepEqual(await b.client.invokeFunction('bad', '1'), { ok: true, output: 'fixed' });
    });

    it('a worker that cannot start for a new channel (the file went): the Runtime Server serves the channel and says why', async () => {
      const sub = join(b.dir, 'sub');
      mkdirSync(sub);
      writeFileSync(join(sub, 'h.sh'), 'bye() { exit 0; }\n');
      await b.client.registerFunction({ id: 'b', handler: 'h.bye', workingDir: sub });
      rmSync(join(sub, 'h.sh'));
      // The worker ends with this call; the next channel's worker cannot source the file.
      assert.deepEqual(await b.client.invokeFunction('b', '1'), { ok: true, output: '' });
      const r = await b.client.invokeFunction('b', '1');
      assert.equal(r.ok ? '' : r.reason, 'NotRegistered');
      assert.match(r.ok ? '' : r.error, /the bash worker could not restart: .*sourcing h failed/);
      assert.equal(b.client.callServer('b'), 'runtime-server');
    });

    it('with KRT_FUNCTION_CALL_HANDOFF=off the Runtime Server serves the channel (the old path)', async () => {
      const off = await runtimePair(
        b.dir,
        'bash',
        { PATH: process.env.PATH, KRT_FUNCTION_CALL_HANDOFF: 'off' },
        'off.sock',
      );
      try {
        await off.client.registerFunction({ id: 'e', handler: 'h.echo', workingDir: b.dir });
        assert.deepEqual(await off.client.invokeFunction('e', '"x"'), { ok: true, output: 'x' });
        assert.equal(off.client.callServer('e'), 'runtime-server');
      } finally {
        off.close();
      }
    });
  });

  describe('python: the channel handed to the warm worker', () => {
    const b = pairPerBlock('krt-pycalls-', 'python', {
      'fns/h.py':
        'import os, time\ndef echo(p):\n    print("noise")\n    return p\ndef slow(p):\n    time.sleep(30)\ndef die(p):\n    os._exit(3)\n',
    });

    it('the worker answers runtimed itself: no call reaches the Runtime Server', async () => {
      await b.client.registerFunction({ id: 'p', handler: 'fns.h.echo', workingDir: b.dir });
      const f = b.srv.functions.get('p')!;
      let throughServer = 0;
      const invoke = f.invoke.bind(f);
      f.invoke = (payload) => (throughServer++, invoke(payload));
      for (let i = 0; i < 20; i++)
        assert.deepEqual(await b.client.invokeFunction('p', `{"i":\n${i}}`), { ok: true, output: { i } });
      assert.equal(b.client.callServer('p'), 'python-worker');
      assert.equal(throughServer, 0);
    });

    it('a call the Run cancels is Cancelled (the worker ended); the function then answers NotRegistered', async () => {
      await b.client.registerFunction({ id: 's', handler: 'fns.h.slow', workingDir: b.dir });
      const call = b.client.invokeFunction('s', '1');
      for (let i = 0; i < 100 && b.client.callServer('s') !== 'python-worker'; i++)
        await new Promise((r) => setTimeout(r, 20));
      await b.client.cancelFunctionCall('s');
      assert.deepEqual(await call, {
        ok: false,
        reason: 'Cancelled',
        error: 'the python-worker ended during the call',
      });
      const next = await b.client.invokeFunction('s', '1');
      assert.deepEqual(next.ok ? '' : [next.reason, next.error], ['NotRegistered', 'the python worker has exited']);
      assert.equal(b.client.callServer('s'), 'runtime-server');
      await b.client.unregisterFunction('p');
      const gone = await b.client.invokeFunction('p', '1');
      assert.deepEqual(gone.ok ? '' : [gone.reason, gone.error], ['NotRegistered', 'function p not registered']);
    });

    it('a worker that dies during a call: Cancelled, and the next call answers NotRegistered at once (no wait for a 101)', async function () {
      // 15 python workers start one after another: room for a loaded machine (a unit run once
      // timed out here while other suites ran), not a latency bound.
      this.timeout(60_000);
      for (let i = 0; i < 15; i++) {
        await b.client.registerFunction({ id: `die${i}`, handler: 'fns.h.die', workingDir: b.dir });
        const r = await b.client.invokeFunction(`die${i}`, '1');
        assert.equal(r.ok ? '' : r.reason, 'Cancelled');
        // Often handed to the dying worker before its exit is seen: the hand-off must not hang.
        const next = await b.client.invokeFunction(`die${i}`, '1');
        assert.deepEqual(next.ok ? '' : [next.reason, next.error], ['NotRegistered', 'the python worker has exited']);
      }
    });

    it('runtimed refuses a call itself once the lease it renewed lapsed', async () => {
      await b.client.registerFunction({ id: 'q', handler: 'fns.h.echo', workingDir: b.dir });
      assert.deepEqual(await b.client.invokeFunction('q', '2'), { ok: true, output: 2 });
      await b.client.renewLease(1);
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(b.client.fenced(), true);
      const r = await b.client.invokeFunction('q', '1');
      assert.deepEqual(r.ok ? '' : [r.reason, r.error], ['NotRegistered', 'fenced: the execution lease lapsed']);
    });
  });
});
