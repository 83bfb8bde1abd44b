import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket, { type ClientOptions } from 'ws';
import { Channel, PROTOCOL } from '../../lib/session/channel.ts';
import { DialIn } from '../dial-in.ts';
import { RuntimeClient } from '../runtime-client.ts';
import { startRuntimeServer, type RuntimeServer } from './server.ts';
import { SESSION_HEADER } from './sessions.ts';

type Status = { status?: string; reason?: string };

describe('runtime server: execution lease (fencing) with real processes', () => {
  let dir: string;
  let srv: RuntimeServer;
  let channel: DialIn;
  let client: RuntimeClient;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'krt-lease-'));
    channel = new DialIn(join(dir, 'rt.sock'));
    await channel.listen();
    srv = startRuntimeServer(join(dir, 'rt.sock'), 'bash', {});
    client = new RuntimeClient(channel);
  });
  afterEach(() => {
    client.close();
    srv.close();
    channel.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const loop = (mark: string): string =>
    `echo $$ > "${mark}.pid"; while :; do echo tick >> "${mark}"; sleep 0.05; done`;
  const start = async (id: string, script: string): Promise<void> => {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(dir, `${id}.sh`), script);
    await client.execute({ id, workingDir: dir, env: {}, entrypoint: join(dir, `${id}.sh`), args: [] });
  };
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  it('does not fence before runtimed ever renewed the lease', async () => {
    const mark = join(dir, 'free');
    await start('free', `${loop(mark)}`);
    while (!existsSync(`${mark}.pid`)) await new Promise((r) => setTimeout(r, 20));
    assert.equal((await client.get('free'))?.state, 'RUNNING');
    await client.cancel('free');
  });

  it('kills the process group when the lease lapses, and refuses new executions until renewed', async () => {
    await client.renewLease(60_000);
    const mark = join(dir, 'm');
    await start('a', loop(mark));
    while (!existsSync(`${mark}.pid`)) await new Promise((r) => setTimeout(r, 20));
    const pid = Number(readFileSync(`${mark}.pid`, 'utf8'));
    await client.renewLease(0);
    const end = await client.follow('a', 0, () => undefined);
    assert.equal(end.state, 'FAILED');
    assert.equal(end.errorMessage, 'fenced');
    while (alive(pid)) await new Promise((r) => setTimeout(r, 20));
    const size = readFileSync(mark).length;
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(readFileSync(mark).length, size, 'nothing of the fenced execution runs on');
    await assert.rejects(start('b', 'true'), /fenced/);
    await client.renewLease(60_000);
    await start('b', 'true');
    assert.equal((await client.follow('b', 0, () => undefined)).state, 'SUCCEEDED');
  });

  it('a renewal processed after the deadline runtimed sent fences at once: it does not extend the lease', async () => {
    // runtimed computed the renewal 60 s before the Runtime Server processes it (as when the
    // Runtime Server was stopped with the request queued): 30 s of validity ended 30 s ago.
    const late = new RuntimeClient(channel, () => process.hrtime.bigint() - 60_000_000_000n);
    try {
      await client.renewLease(60_000);
      const mark = join(dir, 'late');
      await start('l', loop(mark));
      while (!existsSync(`${mark}.pid`)) await new Promise((r) => setTimeout(r, 20));
      await late.renewLease(30_000);
      await assert.rejects(start('m', 'true'), /fenced/);
      assert.equal((await client.follow('l', 0, () => undefined)).errorMessage, 'fenced');
    } finally {
      late.close();
    }
  });

  it("runtimed's own view of the lease lapses at the deadline it sent, on its clock", async () => {
    let now = process.hrtime.bigint();
    const own = new RuntimeClient(channel, () => now);
    try {
      await own.renewLease(20_000);
      now += 19_999_999_999n;
      assert.equal(own.fenced(), false);
      now += 1n;
      assert.equal(own.fenced(), true);
    } finally {
      own.close();
    }
  });

  it('kills the process groups of its executions when it closes (SIGTERM): none outlives it', async () => {
    const mark = join(dir, 'c');
    await start('c', `sleep 300 & echo $! > "${mark}.child"; ${loop(mark)}`);
    while (!existsSync(`${mark}.pid`) || !existsSync(`${mark}.child`)) await new Promise((r) => setTimeout(r, 20));
    const pids = [Number(readFileSync(`${mark}.pid`, 'utf8')), Number(readFileSync(`${mark}.child`, 'utf8'))];
    srv.close();
    while (pids.some(alive)) await new Promise((r) => setTimeout(r, 20));
    // Not 'fenced': the lease did not lapse; runtimed leaves such a Run to its Pod's fate.
    assert.equal(srv.executions.get('c')?.summary().errorMessage, 'shutdown');
  });

  /** Opens a session operation; resolves with its status frame, or the HTTP status it was refused with. */
  const operation = (
    command: string[],
  ): { opened: Promise<boolean>; done: Promise<{ status?: Status; refused?: number }> } => {
    const ws = new WebSocket('ws://runtime/v1/sessions', [PROTOCOL], {
      createConnection: channel.createConnection as unknown as ClientOptions['createConnection'],
      headers: {
        [SESSION_HEADER]: Buffer.from(JSON.stringify({ id: 's', command, workingDir: dir, env: {} })).toString(
          'base64',
        ),
      },
    });
    let status: Status | undefined;
    ws.on('message', (m: Buffer) => {
      if (m[0] === Channel.Status) status = JSON.parse(m.subarray(1).toString('utf8')) as Status;
    });
    return {
      // false when the connection failed before the session opened (a dialled-in connection not
      // there yet on a loaded machine): the caller tries again.
      opened: new Promise((r) => {
        ws.once('open', () => r(true));
        ws.once('close', () => r(false));
        ws.once('unexpected-response', () => r(false));
      }),
      done: new Promise((resolve) => {
        ws.once('unexpected-response', (_q, res) => resolve({ refused: res.statusCode ?? 0 }));
        ws.once('close', () => resolve(status ? { status } : {}));
        ws.on('error', () => undefined);
      }),
    };
  };

  it('fences session operations with the lease: running ones are killed, new ones refused until renewed (issue 11 c)', async () => {
    await client.renewLease(60_000);
    const mark = join(dir, 'sess');
    let op = operation(['bash', '-c', `${loop(mark)}`]);
    for (let i = 0; !(await op.opened); i++) {
      assert.ok(i < 100, 'the session operation opens');
      await new Promise((r) => setTimeout(r, 100));
      op = operation(['bash', '-c', `${loop(mark)}`]);
    }
    while (!existsSync(`${mark}.pid`)) await new Promise((r) => setTimeout(r, 20));
    const pid = Number(readFileSync(`${mark}.pid`, 'utf8'));
    await client.renewLease(0);
    const end = await op.done;
    assert.equal(end.status?.reason, 'Fenced', JSON.stringify(end));
    while (alive(pid)) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(await operation(['true']).done, { refused: 503 });
    await client.renewLease(60_000);
    const ok = await operation(['true']).done;
    assert.equal(ok.status?.status, 'Success', JSON.stringify(ok));
  });
});
