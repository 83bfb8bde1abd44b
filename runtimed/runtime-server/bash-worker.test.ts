import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Functions, type InvokeResult } from './functions.ts';

const env = { PATH: process.env.PATH };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A bash Functions with `h.sh` = `text` registered as every `h.<name>` in `names`. */
async function worker(text: string, names: string[]): Promise<{ fns: Functions; dir: string; call: Call }> {
  const dir = await mkdtemp(join(tmpdir(), 'krt-bw-'));
  await writeFile(join(dir, 'h.sh'), text);
  const fns = new Functions('bash', env);
  for (const n of names) await fns.register({ id: n, handler: `h.${n}`, workingDir: dir });
  return { fns, dir, call: (id, payload = '1') => fns.get(id)!.invoke(payload) };
}
type Call = (id: string, payload?: string) => Promise<InvokeResult>;

const failure = (r: InvokeResult): string => (r.ok ? 'ok' : `${r.reason}: ${r.error}`);

describe('runtimed/runtime-server warm bash worker: calls run in the worker itself (issue 15)', () => {
  it('runs every call in the same warm shell, sourced once: no process per call', async () => {
    const { fns, dir, call } = await worker('echo sourced >> sourced.log\nf() { printf "%s" "$BASHPID"; }\n', ['f']);
    const pids = new Set<unknown>();
    for (let i = 0; i < 5; i++) {
      const r = await call('f');
      assert.equal(r.ok, true);
      pids.add(r.ok && r.output);
    }
    assert.equal(pids.size, 1);
    assert.equal(await readFile(join(dir, 'sourced.log'), 'utf8'), 'sourced\n');
    fns.fence();
  });

  it('exit N, exit 0, a failure under set -e and exec end the call with their status; the next call gets a fresh worker', async () => {
    const { fns, dir, call } = await worker(
      [
        'echo sourced >> sourced.log',
        'quit() { echo partial; echo why >&2; exit 3; }',
        'done0() { echo \'{"early":true}\'; exit 0; }',
        'strict() { set -e; echo before; false; echo after; }',
        'replace() { exec echo replaced; }',
        'trapped() { trap "echo bye" EXIT; exit 5; }',
        'ok() { printf "%s" "$1"; }',
        '',
      ].join('\n'),
      ['quit', 'done0', 'strict', 'replace', 'trapped', 'ok'],
    );
    // Each twice: the second call runs on a worker started again (sourcing again) after the first.
    for (let i = 0; i < 2; i++) {
      assert.equal(failure(await call('quit')), 'FunctionError: exit status 3: why');
      assert.deepEqual(await call('done0'), { ok: true, output: { early: true } });
      assert.equal(failure(await call('strict')), 'FunctionError: exit status 1: ');
      assert.deepEqual(await call('replace'), { ok: true, output: 'replaced' });
      // The function's own EXIT trap replaces the worker's: the worker's exit status ends the call.
      assert.equal(failure(await call('trapped')), 'FunctionError: exit status 5: ');
    }
    assert.deepEqual(await call('ok', '"a"'), { ok: true, output: 'a' });
    const sourced = (await readFile(join(dir, 'sourced.log'), 'utf8')).split('\n').length - 1;
    assert.ok(sourced >= 6 + 5, `sourced ${sourced} times`);
    fns.fence();
  });

  it("a call's background processes and late output never reach the next call", async () => {
    const { fns, call } = await worker(
      [
        'late() { ( sleep 0.3; echo late-job ) & ( ( sleep 0.3; echo late-orphan ) & ); echo now; }',
        'redirect() { exec >/dev/null 2>&1; echo hidden; }',
        'ok() { printf "%s" "$1"; }',
        '',
      ].join('\n'),
      ['late', 'redirect', 'ok'],
    );
    assert.deepEqual(await call('late'), { ok: true, output: 'now' });
    await sleep(600); // the jobs would have written by now
    assert.deepEqual(await call('ok', '"x"'), { ok: true, output: 'x' });
    assert.deepEqual(await call('redirect'), { ok: true, output: '' });
    assert.deepEqual(await call('ok', '"y"'), { ok: true, output: 'y' });
    fns.fence();
  });

  it('puts shell options and the working directory back after each call; stdin is /dev/null', async () => {
    const { fns, dir, call } = await worker(
      [
        'shopt -s extglob',
        'change() { set -euo pipefail; shopt -u extglob; shopt -s nullglob; cd /; echo changed; }',
        'show() { printf \'{"opts":"%s","extglob":"%s","nullglob":"%s","pwd":"%s"}\' "$SHELLOPTS" \\',
        '  "$(shopt -q extglob && echo on)" "$(shopt -q nullglob && echo on)" "$PWD"; }',
        'reads() { cat; read -r x; echo "read:${x:-nothing}"; }',
        '',
      ].join('\n'),
      ['change', 'show', 'reads'],
    );
    const before = await call('show');
    assert.deepEqual(await call('change'), { ok: true, output: 'changed' });
    const after = await call('show');
    assert.deepEqual(after, before);
    assert.deepEqual(after.ok && { ...(after.output as object), opts: '' }, {
      opts: '',
      extglob: 'on',
      nullglob: '',
      pwd: dir,
    });
    assert.doesNotMatch(String(after.ok && (after.output as { opts: string }).opts), /errexit|nounset|pipefail/);
    assert.deepEqual(await call('reads'), { ok: true, output: 'read:nothing' });
    fns.fence();
  });

  it('keeps the variables a call sets for later calls, like a python module keeps its globals', async () => {
    const { fns, call } = await worker('count=0\nf() { count=$((count + 1)); printf "%s" "$count"; }\n', ['f']);
    assert.deepEqual(
      [await call('f'), await call('f')],
      [
        { ok: true, output: 1 },
        { ok: true, output: 2 },
      ],
    );
    fns.fence();
  });

  it('a cancelled call and one with too much output end with their worker; the next call gets a new one', async () => {
    const { fns, call } = await worker(
      [
        'spin() { if [ "$1" = 1 ]; then while :; do :; done; fi; echo "$1"; }',
        'big() { head -c 1100000 /dev/zero | tr "\\0" a; }',
        'ok() { printf "%s" "$1"; }',
        '',
      ].join('\n'),
      ['spin', 'big', 'ok'],
    );
    const spinning = call('spin');
    await sleep(200);
    fns.get('spin')!.cancel();
    assert.equal(failure(await spinning), 'Cancelled: the call was cancelled');
    assert.deepEqual(await call('spin', '2'), { ok: true, output: 2 });
    assert.equal(failure(await call('big')), 'OutputTooLarge: output exceeds 1048576 bytes');
    assert.deepEqual(await call('big').then((r) => !r.ok && r.reason), 'OutputTooLarge');
    assert.deepEqual(await call('ok', '"z"'), { ok: true, output: 'z' });
    fns.fence();
  });
});
