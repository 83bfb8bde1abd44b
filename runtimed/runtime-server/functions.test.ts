import assert from 'node:assert/strict';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Functions, RegistrationError, bashScript, outputValue, splitHandler } from './functions.ts';

const env = { PATH: process.env.PATH };

async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krt-fn-'));
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
});
