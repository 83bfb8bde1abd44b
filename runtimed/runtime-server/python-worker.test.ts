import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseInvokeResult } from './function-base.ts';
import { Functions, type InvokeResult } from './functions.ts';
import { payloadLine } from './python-worker.ts';
import { leaseDeadlineNs } from './server.ts';

const env = { PATH: process.env.PATH };
const HANDLERS = [
  'import os',
  'def echo(p):',
  '    print("noise")',
  '    return {"p": p, "pid": os.getpid()}',
  'def bad(p):',
  '    raise ValueError("nope")',
  'def nan(p):',
  '    return float("nan")',
  'def big(p):',
  '    return "x" * (1 << 20)',
  '',
].join('\n');

/** A connected pair of Unix sockets: `near` stays here, `far` is handed over. */
async function socketPair(dir: string): Promise<{ near: Socket; far: Socket; close: () => void }> {
  const path = join(dir, `pair-${Math.random().toString(16).slice(2)}.sock`);
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(path, r));
  const farP = new Promise<Socket>((r) => srv.once('connection', r));
  const near = connect(path);
  const far = await farP;
  return { near, far, close: () => (near.destroy(), srv.close()) };
}

/** Reads the 101 and then one answer line per call from the near end. */
function reader(near: Socket): { head: () => Promise<string>; answer: () => Promise<InvokeResult> } {
  let buf = '';
  const waiters: ((s: string) => void)[] = [];
  const pump = (): void => {
    for (;;) {
      const w = waiters[0];
      const end = buf.startsWith('HTTP/') ? buf.indexOf('\r\n\r\n') + 4 : buf.indexOf('\n') + 1;
      if (!w || end <= 0) return;
      waiters.shift();
      w(buf.slice(0, end));
      buf = buf.slice(end);
    }
  };
  near.on('data', (c: Buffer) => {
    buf += c.toString('utf8');
    pump();
  });
  const next = (): Promise<string> =>
    new Promise((r) => {
      waiters.push(r);
      pump();
    });
  return { head: next, answer: async () => parseInvokeResult((await next()).trim()) };
}

describe('runtimed/runtime-server python worker hand-off (issue 15)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'krt-pyw-'));
    await mkdir(join(dir, 'pkg'));
    await writeFile(join(dir, 'pkg', '__init__.py'), '');
    await writeFile(join(dir, 'pkg', 'h.py'), HANDLERS);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('parses answers as untrusted and keeps payloads on one line', () => {
    assert.deepEqual(parseInvokeResult('{"ok":true}'), { ok: true, output: null });
    assert.deepEqual(parseInvokeResult('{"ok":false,"reason":"Busy","error":"b"}'), {
      ok: false,
      reason: 'Busy',
      error: 'b',
    });
    for (const bad of ['nope', '{"ok":false,"reason":"Other","error":"x"}', '[1]', '{"ok":false,"reason":"Busy"}'])
      assert.equal((parseInvokeResult(bad) as { reason?: string }).reason, 'FunctionError', bad);
    assert.equal(payloadLine('{"a":\n1}'), '{"a":1}');
    assert.equal(payloadLine('{"a":\n'), undefined);
  });

  it('the worker and the Runtime Server read one clock for the lease deadline (CLOCK_MONOTONIC)', () => {
    const before = leaseDeadlineNs(0) ?? 0n;
    const r = spawnSync('python3', ['-c', 'import time; print(time.monotonic_ns())'], { encoding: 'utf8' });
    const after = leaseDeadlineNs(0) ?? 0n;
    const py = BigInt(r.stdout.trim());
    assert.ok(py >= before && py <= after, `${before} <= ${py} <= ${after}`);
    assert.equal(leaseDeadlineNs(undefined), undefined);
    assert.equal(leaseDeadlineNs(1.5, 10n), 1_500_010n);
  });

  it('a handed-over channel is answered by the worker itself, with the same results as through the Runtime Server', async () => {
    const fns = new Functions('python', env);
    for (const h of ['echo', 'bad', 'nan', 'big'])
      await fns.register({ id: h, handler: `pkg.h.${h}`, workingDir: dir });
    const cases: [string, string, string][] = [
      ['echo', '{"a":1}', 'ok'],
      ['echo', '{"a":\n2}', 'ok'],
      ['echo', 'not json', 'FunctionError: the payload is not JSON'],
      ['bad', '1', 'FunctionError: ValueError: nope'],
      ['nan', '1', 'FunctionError: ValueError: Out of range float values are not JSON compliant'],
      ['big', '1', 'OutputTooLarge: output exceeds 1048576 bytes'],
    ];
    const pairs: Awaited<ReturnType<typeof socketPair>>[] = [];
    try {
      for (const [id, payload, want] of cases) {
        const pair = await socketPair(dir);
        pairs.push(pair);
        const rd = reader(pair.near);
        assert.equal(fns.get(id)?.handOff(pair.far, Buffer.alloc(0)), true);
        assert.match(await rd.head(), /^HTTP\/1.1 101 .*\r\nKruntimes-Call-Server: python-worker\r\n/s);
        pair.near.write(`${payloadLine(payload) ?? payload}\n`);
        const direct = await rd.answer();
        assert.equal(direct.ok ? 'ok' : `${direct.reason}: ${direct.error}`, want, `${id} ${payload}`);
        assert.deepEqual(direct, await fns.get(id)!.invoke(payload), `${id} ${payload}: both paths`);
      }
    } finally {
      for (const p of pairs) p.close();
      fns.fence();
    }
  });

  it('the worker refuses a call once the lease deadline passed, before the Runtime Server kills it', async () => {
    let deadline: bigint | undefined;
    const fns = new Functions('python', env, { leaseDeadline: () => deadline });
    await fns.register({ id: 'f', handler: 'pkg.h.echo', workingDir: dir });
    const pair = await socketPair(dir);
    try {
      const rd = reader(pair.near);
      assert.equal(fns.get('f')?.handOff(pair.far, Buffer.alloc(0)), true);
      await rd.head();
      const call = async (): Promise<string> => {
        pair.near.write('1\n');
        const r = await rd.answer();
        return r.ok ? 'ok' : `${r.reason}: ${r.error}`;
      };
      assert.equal(await call(), 'ok'); // not armed
      deadline = leaseDeadlineNs(60_000);
      fns.leaseRenewed();
      assert.equal(await call(), 'ok');
      deadline = leaseDeadlineNs(0);
      fns.leaseRenewed();
      assert.equal(await call(), 'NotRegistered: fenced: the execution lease lapsed');
      deadline = leaseDeadlineNs(60_000);
      fns.leaseRenewed();
      assert.equal(await call(), 'ok');
    } finally {
      pair.close();
      fns.fence();
    }
  });

  it('a new channel replaces the old one; with the hand-off off the Runtime Server keeps the channel', async () => {
    const fns = new Functions('python', env);
    const off = new Functions('python', { ...env, KRT_FUNCTION_CALL_HANDOFF: 'off' });
    await fns.register({ id: 'f', handler: 'pkg.h.echo', workingDir: dir });
    await off.register({ id: 'f', handler: 'pkg.h.echo', workingDir: dir });
    const [a, b, c] = [await socketPair(dir), await socketPair(dir), await socketPair(dir)];
    try {
      const ra = reader(a.near);
      const rb = reader(b.near);
      assert.equal(fns.get('f')?.handOff(a.far, Buffer.alloc(0)), true);
      await ra.head();
      const closed = new Promise((r) => a.near.once('close', r));
      assert.equal(fns.get('f')?.handOff(b.far, Buffer.from('"early"\n')), true);
      await rb.head();
      assert.equal(((await rb.answer()) as { output: { p: unknown } }).output.p, 'early');
      a.near.resume();
      await closed;
      assert.equal(off.get('f')?.handOff(c.far, Buffer.alloc(0)), false);
    } finally {
      for (const p of [a, b, c]) p.close();
      fns.fence();
      off.fence();
    }
  });

  it('a channel handed to a worker that died before taking it is closed, not left waiting for a 101', async () => {
    const fns = new Functions('python', env);
    await fns.register({ id: 'f', handler: 'pkg.h.echo', workingDir: dir });
    const r = (await fns.get('f')!.invoke('0')) as { output: { pid: number } };
    const pair = await socketPair(dir);
    try {
      const closed = new Promise((resolve) => pair.near.once('close', resolve));
      pair.near.resume();
      // Killed and handed a channel in the same tick: the Runtime Server has not seen the exit yet.
      process.kill(r.output.pid, 'SIGKILL');
      assert.equal(fns.get('f')?.handOff(pair.far, Buffer.alloc(0)), true);
      await closed;
    } finally {
      pair.close();
      fns.fence();
    }
  });
});
