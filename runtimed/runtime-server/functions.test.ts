import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '../../lib/fs/temp-dir.ts';
import { CallOutput } from './bash-calls.ts';
import { Functions, RegistrationError, bashScript, outputValue, splitHandler } from './functions.ts';

const env = { PATH: process.env.PATH };

async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = tempDir('krt-fn-');
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  return dir;
}

describe('runtimed/runtime-server function handlers (issue 15)', () => {
  it('splits handlers and refuses ones without a function part', () => {
    assert.deepEqual(splitHandler('pkg.mod.fn'), { module: 'pkg.mod', fn: 'fn' });
    assert.throws(() => splitHandler('nodot'), RegistrationError);
    assert.throws(() => splitHandler('.fn'), RegistrationError);
  });

  it('finds bash handler files inside the working directory only', () => {
    const has = (p: string): boolean => p === '/w/h.sh';
    assert.equal(bashScript('/w', 'h', has), '/w/h.sh');
    assert.throws(() => bashScript('/w', '../etc/passwd', () => true), /inside the working directory/);
    assert.throws(() => bashScript('/w', 'missing', has), /not found/);
  });

  it('returns JSON output as a value and anything else as text', () => {
    assert.deepEqual(outputValue('{"a":1}\n'), { a: 1 });
    assert.equal(outputValue('hello\n'), 'hello');
    for (const [out, value] of [
      [' [1, 2]', [1, 2]],
      ['"s"', 's'],
      ['-1.5', -1.5],
      ['true', true],
      ['null', null],
      ['nope', 'nope'],
      ['', ''],
      ['{not json', '{not json'],
    ] as const)
      assert.deepEqual(outputValue(`${out}\n`), value, out);
  });

  it('bash: passes the payload as one argument and returns stdout; errors do not unregister', async () => {
    const dir = await dirWith({
      'h.sh': 'echo sourced >&2\ngreet() { printf \'{"got":%s}\' "$1"; }\nfail() { echo boom >&2; return 2; }\n',
    });
    const fns = new Functions('bash', env);
    await fns.register({ id: 'a', handler: 'h.greet', workingDir: dir });
    assert.deepEqual(await fns.get('a')?.invoke('{"x": "a b"}'), { ok: true, output: { got: { x: 'a b' } } });
    await fns.register({ id: 'b', handler: 'h.sh.fail', workingDir: dir });
    const r = await fns.get('b')?.invoke('1');
    assert.equal(r?.ok, false);
    assert.match(r && !r.ok ? r.error : '', /exit status 2: .*boom/s);
    assert.deepEqual(await fns.get('a')?.invoke('2'), { ok: true, output: { got: 2 } });
    await assert.rejects(fns.register({ id: 'c', handler: 'h.nope', workingDir: dir }), /no bash function "nope"/);
    fns.fence();
  });

  it('bash, KRT_BASH_CALL_ISOLATION=subshell: sources once; each call in a subshell (state, output, processes)', async () => {
    const dir = await dirWith({
      'h.sh': [
        'echo sourced >> sourced.log',
        'count=0',
        'f() {',
        '  count=$((count + 1))',
        '  printf \'{"count":%s,"prev":"%s","pwd":"%s"}\' "$count" "${PREV:-}" "$PWD"',
        '  PREV=set; export LEAK=1; cd /; trap "echo trapped >&2" EXIT',
        '  ( sleep 0.3; echo late ) &',
        '}',
        'big() { head -c 1100000 /dev/zero | tr "\\0" a; }',
        '',
      ].join('\n'),
    });
    const fns = new Functions('bash', { ...env, KRT_BASH_CALL_ISOLATION: 'subshell' });
    await fns.register({ id: 'w', handler: 'h.f', workingDir: dir });
    const first = await fns.get('w')!.invoke('1');
    await new Promise((r) => setTimeout(r, 500)); // the first call's background job would have written by now
    const second = await fns.get('w')!.invoke('2');
    assert.deepEqual(first, second);
    assert.deepEqual(first.ok && first.output, { count: 1, prev: '', pwd: dir });
    assert.equal(await readFile(join(dir, 'sourced.log'), 'utf8'), 'sourced\n');
    await fns.register({ id: 'big', handler: 'h.big', workingDir: dir });
    const big = await fns.get('big')!.invoke('1');
    assert.equal(big.ok ? '' : big.reason, 'OutputTooLarge');
    assert.equal((await fns.get('w')!.invoke('3')).ok, true);
    fns.fence();
  });

  it('python: imports the module once at registration and keeps it warm across calls', async () => {
    const dir = await dirWith({
      'pkg/__init__.py': '',
      'pkg/mod.py':
        'imports = 0\nimports += 1\ncalls = []\ndef handle(p):\n    calls.append(p)\n    print("noise")\n    return {"p": p, "imports": imports, "calls": len(calls)}\ndef bad(p):\n    raise ValueError("nope")\n',
    });
    const fns = new Functions('python', env);
    await fns.register({ id: 'p', handler: 'pkg.mod.handle', workingDir: dir });
    assert.deepEqual(await fns.get('p')?.invoke('{"a":\n1}'), {
      ok: true,
      output: { p: { a: 1 }, imports: 1, calls: 1 },
    });
    assert.deepEqual(await fns.get('p')?.invoke('"x"'), { ok: true, output: { p: 'x', imports: 1, calls: 2 } });
    await fns.register({ id: 'q', handler: 'pkg.mod.bad', workingDir: dir });
    const r = await fns.get('q')?.invoke('1');
    assert.deepEqual(r && !r.ok ? [r.reason, r.error] : [], ['FunctionError', 'ValueError: nope']);
    await assert.rejects(fns.register({ id: 'r', handler: 'pkg.missing.f', workingDir: dir }), /ModuleNotFoundError/);
    fns.fence();
  });

  it('refuses a second concurrent call (Busy) and cancels the in-flight one', async () => {
    const dir = await dirWith({ 'h.sh': 'slow() { sleep 30; echo done; }\n' });
    const fns = new Functions('bash', env);
    await fns.register({ id: 's', handler: 'h.slow', workingDir: dir });
    const first = fns.get('s')!.invoke('1');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await fns.get('s')!.invoke('2')).ok, false);
    assert.equal(fns.unregister('s'), true);
    const r = await first;
    assert.deepEqual(r.ok ? '' : r.reason, 'Cancelled');
  });

  it('bash: cancelling a call keeps the warm worker for the next call', async () => {
    const dir = await dirWith({ 'h.sh': 'f() { [ "$1" = 1 ] && sleep 30; echo "$1"; }\n' });
    const fns = new Functions('bash', env);
    await fns.register({ id: 'c', handler: 'h.f', workingDir: dir });
    const first = fns.get('c')!.invoke('1');
    await new Promise((r) => setTimeout(r, 200));
    fns.get('c')!.cancel();
    const r = await first;
    assert.equal(r.ok ? '' : r.reason, 'Cancelled');
    assert.deepEqual(await fns.get('c')!.invoke('2'), { ok: true, output: 2 });
    fns.fence();
  });

  it('bash: a worker refuses a call once the lease deadline it reads has passed (fenced), without running it', async () => {
    const dir = await dirWith({ 'h.sh': 'f() { echo ran >> ran.log; printf ok; }\n' });
    let remaining: number | undefined = 60_000;
    const fns = new Functions('bash', env, { leaseRemainingMs: () => remaining });
    await fns.register({ id: 'f', handler: 'h.f', workingDir: dir });
    assert.deepEqual(await fns.get('f')!.invoke('1'), { ok: true, output: 'ok' });
    remaining = -1;
    fns.leaseRenewed();
    assert.deepEqual(await fns.get('f')!.invoke('1'), {
      ok: false,
      reason: 'NotRegistered',
      error: 'fenced: the execution lease lapsed',
    });
    // Not armed (no renewal yet): no deadline to check.
    remaining = undefined;
    fns.leaseRenewed();
    assert.deepEqual(await fns.get('f')!.invoke('1'), { ok: true, output: 'ok' });
    assert.equal(await readFile(join(dir, 'ran.log'), 'utf8'), 'ran\nran\n');
    fns.fence();
  });

  it('bash: reads a call end marker split across chunks and bounds the output', () => {
    const out = new CallOutput('\ntok ', 10);
    assert.equal(out.push(Buffer.from('hello\nto')), undefined);
    assert.deepEqual(out.push(Buffer.from('k 0\n')), { output: 'hello', status: '0', tooLarge: false, by: 0 });
    assert.equal(out.push(Buffer.from('x'.repeat(40))), 'overflow');
    assert.equal(out.push(Buffer.from('y'.repeat(40))), undefined);
    assert.deepEqual(out.push(Buffer.from('\ntok 137\n')), { output: '', status: '137', tooLarge: true, by: 0 });
    assert.deepEqual(out.push(Buffer.from('ok\ntok 0\n')), { output: 'ok', status: '0', tooLarge: false, by: 0 });
    // A new call drops what arrived outside any call; a worker that ended leaves its output as the rest.
    out.push(Buffer.from('stray'));
    out.reset('\nnext ');
    assert.equal(out.push(Buffer.from('partial')), undefined);
    assert.deepEqual(out.rest(), { output: 'partial', status: '', tooLarge: false });
  });

  it('bash: finds a marker however the output is cut into chunks (each chunk is scanned once)', () => {
    const byteByByte = (out: CallOutput, text: string): unknown[] =>
      [...Buffer.from(text)].map((b) => out.push(Buffer.from([b]))).filter((r) => r !== undefined);
    const out = new CallOutput('\ntok ', 100, '\nlonger-secret ');
    const cases: [string, unknown][] = [
      ['h\u00e9\n\nto\ntok\ntok 0\n', { output: 'h\u00e9\n\nto\ntok', status: '0', tooLarge: false, by: 0 }],
      [
        'x\nlonger-secr\nlonger-secret exit 3\n',
        { output: 'x\nlonger-secr', status: 'exit 3', tooLarge: false, by: 1 },
      ],
      ['a\nlonger-secret killed\n', { output: 'a', status: 'killed', tooLarge: false, by: 1 }],
    ];
    for (const [text, want] of cases) {
      out.reset('\ntok ');
      assert.deepEqual(byteByByte(out, text), [want], JSON.stringify(text));
    }
    // Chunks of every size give the same end.
    for (let size = 1; size < 12; size++) {
      out.reset('\ntok ');
      const text = Buffer.from('one\ntwo\ntok 0\n');
      const ends = [];
      for (let i = 0; i < text.length; i += size) ends.push(out.push(text.subarray(i, i + size)));
      assert.deepEqual(
        ends.filter((r) => r !== undefined),
        [{ output: 'one\ntwo', status: '0', tooLarge: false, by: 0 }],
      );
    }
  });

  it("bash: the Runtime Server's end-of-worker line ends a call too, whichever marker comes first", () => {
    const out = new CallOutput('\ntok ', 100, '\nsecret ');
    assert.deepEqual(out.push(Buffer.from('part\nsecret exit 3\n')), {
      output: 'part',
      status: 'exit 3',
      tooLarge: false,
      by: 1,
    });
    out.reset('\nnext ');
    assert.deepEqual(out.push(Buffer.from('a\nnext 0\n\nsecret killed\n')), {
      output: 'a',
      status: '0',
      tooLarge: false,
      by: 0,
    });
  });
});
