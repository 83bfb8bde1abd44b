import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { oneLine } from './call-channel.ts';
import { DialIn } from './dial-in.ts';
import { RuntimeClient } from './runtime-client.ts';
import { lineSplitter } from './runtime-server/function-calls.ts';
import { startRuntimeServer, type RuntimeServer } from './runtime-server/server.ts';

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
    let dir: string;
    let srv: RuntimeServer;
    let dial: DialIn;
    let client: RuntimeClient;
    let taken = 0;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'krt-calls-'));
      writeFileSync(join(dir, 'h.sh'), 'echo() { printf "%s" "$1"; }\n');
      dial = new DialIn(join(dir, 'rt.sock'));
      const take = dial.take.bind(dial);
      dial.take = () => {
        taken++;
        return take();
      };
      await dial.listen();
      srv = startRuntimeServer(dial.path, 'bash', { PATH: process.env.PATH });
      client = new RuntimeClient(dial);
    });
    after(() => {
      client.close();
      srv.close();
      dial.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('carries many calls over one upgraded connection, no HTTP request each; unregistered answers NotRegistered, a new registration is called again', async () => {
      await client.registerFunction({ id: 'f', handler: 'h.echo', workingDir: dir });
      let requests = 0;
      srv.server.on('request', () => requests++);
      const before = taken;
      for (let i = 0; i < 20; i++)
        assert.deepEqual(await client.invokeFunction('f', `{"i":\n${i}}`), { ok: true, output: { i } });
      assert.equal(taken - before, 1); // one connection, upgraded once
      assert.equal(requests, 0); // and no HTTP request per call
      await client.unregisterFunction('f');
      const r = await client.invokeFunction('f', '1');
      assert.equal(r.ok ? '' : r.reason, 'NotRegistered');
      await client.registerFunction({ id: 'f', handler: 'h.echo', workingDir: dir });
      assert.deepEqual(await client.invokeFunction('f', '"again"'), { ok: true, output: 'again' });
    });

    it('answers NotRegistered on a channel once the execution lease lapsed (fenced)', async () => {
      await client.renewLease(1);
      await new Promise((r) => setTimeout(r, 50));
      const r = await client.invokeFunction('f', '1');
      assert.deepEqual(r.ok ? '' : [r.reason, r.error], ['NotRegistered', 'fenced: the execution lease lapsed']);
    });
  });
});
