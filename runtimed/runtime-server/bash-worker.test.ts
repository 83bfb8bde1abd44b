import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bashCases, dirWith, runtimePair } from '../runtime-fixtures.ts';
import { Functions, type InvokeResult } from './functions.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Call = (id: string, payload?: string) => Promise<InvokeResult>;
interface Worker {
  dir: string;
  call: Call;
  cancel: (id: string) => Promise<void>;
  /** Who answered the last call: 'runtime-server' (pipes) or 'bash-worker' (the worker holds runtimed's channel). */
  servedBy: (id: string) => string | undefined;
}
type Path = 'pipes' | 'channel';

/** Cleanups of the workers a spec started (run after each spec, so a failed one leaves no process behind). */
const started: (() => void)[] = [];

/** A bash function with `h.sh` = `text` registered as every `h.<name>` in `names`, called on `path`. */
async function worker(text: string, names: string[], path: Path, more: NodeJS.ProcessEnv = {}): Promise<Worker> {
  const dir = dirWith('krt-bw-', { 'h.sh': text });
  const env = { PATH: process.env.PATH, ...more };
  if (path === 'pipes') {
    const fns = new Functions('bash', env);
    started.push(() => fns.fence());
    for (const n of names) await fns.register({ id: n, handler: `h.${n}`, workingDir: dir });
    return {
      dir,
      call: (id, payload = '1') => fns.get(id)!.invoke(payload),
      cancel: (id) => Promise.resolve(fns.get(id)!.cancel()),
      servedBy: () => 'runtime-server',
    };
  }
  // runtimed's side for real: a Runtime Server dialling in, calls through RuntimeClient's channel.
  const { client, close } = await runtimePair(dir, 'bash', env);
  started.push(close);
  for (const n of names) await client.registerFunction({ id: n, handler: `h.${n}`, workingDir: dir });
  return {
    dir,
    call: (id, payload = '1') => client.invokeFunction(id, payload),
    cancel: (id) => client.cancelFunctionCall(id),
    servedBy: (id) => client.callServer(id),
  };
}

const failure = (r: InvokeResult): string => (r.ok ? 'ok' : `${r.reason}: ${r.error}`);

for (const path of ['pipes', 'channel'] as const)
  describe(`runtimed/runtime-server warm bash worker: calls run in the worker itself (issue 15), ${path === 'pipes' ? "on the Runtime Server's pipes" : "holding runtimed's call channel (ADR 0029)"}`, () => {
    afterEach(() => {
      for (const end of started.splice(0)) end();
    });

    it('runs every call in the same warm shell, sourced once: no process per call', async () => {
      const { dir, call, ...w } = await worker(
        'echo sourced >> sourced.log\nf() { printf "%s" "$BASHPID"; }\n',
        ['f'],
        path,
      );
      const pids = new Set<unknown>();
      for (let i = 0; i < 5; i++) {
        const r = await call('f');
        assert.equal(r.ok, true);
        pids.add(r.ok && r.output);
      }
      assert.equal(pids.size, 1);
      // Once at registration on both paths: on the channel, only the worker runtimed's channel is
      // given to sources the file (the Runtime Server starts no worker of its own first).
      assert.equal(await readFile(join(dir, 'sourced.log'), 'utf8'), 'sourced\n');
      assert.equal(w.servedBy('f'), path === 'pipes' ? 'runtime-server' : 'bash-worker');
    });

    it('exit N, exit 0, a failure under set -e and exec end the call with their status; the next call gets a fresh worker', async () => {
      const { dir, call } = await worker(
        bashCases(
          {
            '"quit"': 'echo partial; echo why >&2; exit 3',
            '"done0"': 'echo \'{"early":true}\'; exit 0',
            '"strict"': 'set -e; echo before; false; echo after',
            '"replace"': 'exec echo replaced',
            '"trapped"': 'trap "echo bye" EXIT; exit 5',
          },
          ['echo sourced >> sourced.log'],
        ),
        ['f'],
        path,
      );
      const ends = [
        ['"quit"', 'FunctionError: exit status 3: why'],
        ['"done0"', 'ok {"early":true}'],
        ['"strict"', 'FunctionError: exit status 1: '],
        ['"replace"', 'ok "replaced"'],
        ['"trapped"', 'FunctionError: exit status 5: '],
      ];
      for (const [payload, want] of ends) {
        const r = await call('f', payload);
        assert.equal(r.ok ? `ok ${JSON.stringify(r.output)}` : failure(r), want, payload);
        // The same function answers the next call, on a new worker that sourced the file again.
        assert.deepEqual(await call('f', '"next"'), { ok: true, output: 'next' });
      }
      assert.equal(await readFile(join(dir, 'sourced.log'), 'utf8'), 'sourced\n'.repeat(1 + ends.length));
    });

    it("a call's background processes are ended with the call; late output never reaches the next call", async () => {
      const { dir, call } = await worker(
        bashCases({
          '"late"':
            '( sleep 0.3; echo job > job.txt; echo late-job ) & ( ( sleep 0.3; echo orphan > orphan.txt ) & ); echo now',
          '"escape"': 'set -m; ( sleep 0.3; echo escaped ) & set +m; echo now',
          '"redirect"': 'exec >/dev/null 2>&1; echo hidden',
        }),
        ['f'],
        path,
      );
      assert.deepEqual(await call('f', '"late"'), { ok: true, output: 'now' });
      await sleep(600); // the jobs would have written by now
      await assert.rejects(readFile(join(dir, 'job.txt')), /ENOENT/);
      await assert.rejects(readFile(join(dir, 'orphan.txt')), /ENOENT/);
      assert.deepEqual(await call('f', '"x"'), { ok: true, output: 'x' });
      // A process that left the group writes after its call: dropped, it is outside any call.
      assert.deepEqual(await call('f', '"escape"'), { ok: true, output: 'now' });
      await sleep(600);
      assert.deepEqual(await call('f', '"y"'), { ok: true, output: 'y' });
      // A redirection of the call's stdout ends with the call.
      assert.deepEqual(await call('f', '"redirect"'), { ok: true, output: '' });
      assert.deepEqual(await call('f', '"z"'), { ok: true, output: 'z' });
    });

    it('puts shell options and the working directory back after each call; stdin is /dev/null', async () => {
      const { dir, call } = await worker(
        bashCases(
          {
            '"change"': 'set -uo pipefail; set -f; shopt -u extglob; shopt -s nullglob; cd /; echo changed',
            '"reads"': 'cat; read -r x; echo "read:${x:-nothing}"',
            '"show"': 'printf \'{"opts":"%s","bash":"%s","pwd":"%s"}\' "$SHELLOPTS" "$BASHOPTS" "$PWD"',
          },
          ['shopt -s extglob'],
        ),
        ['f'],
        path,
      );
      const before = await call('f', '"show"');
      assert.deepEqual(await call('f', '"change"'), { ok: true, output: 'changed' });
      const after = await call('f', '"show"');
      assert.deepEqual(after, before);
      const shown = (after.ok ? after.output : {}) as { opts: string; bash: string; pwd: string };
      assert.equal(shown.pwd, dir);
      assert.match(shown.bash, /extglob/);
      assert.doesNotMatch(`${shown.opts} ${shown.bash}`, /nounset|pipefail|noglob|nullglob/);
      assert.deepEqual(await call('f', '"reads"'), { ok: true, output: 'read:nothing' });
    });

    it("a call's stderr is its own, and exec redirections of stdin, stdout and stderr end with the call, with no file opened per call", async () => {
      const { call } = await worker(
        bashCases({
          '"warn"': 'echo first >&2; echo warned',
          '"fail"': 'echo second >&2; return 1',
          '"hush"': 'exec 2>/dev/null <h.sh; echo hushed',
          '"close"': 'exec 56<&- 59>&- <h.sh; echo closed',
          '"away"': 'echo kept; exec 56<&- 59>&- >/dev/null; echo gone',
          '"reads"': 'cat; echo read',
          // The modification time of the file the call's stderr goes to (a new open empties it, and so sets it).
          '"stamp"': 'printf "t%s" "$(date -r /dev/stderr +%s.%N)"',
        }),
        ['f'],
        path,
      );
      assert.deepEqual(await call('f', '"warn"'), { ok: true, output: 'warned' });
      assert.equal(failure(await call('f', '"fail"')), 'FunctionError: exit status 1: second');
      assert.deepEqual(await call('f', '"hush"'), { ok: true, output: 'hushed' });
      assert.deepEqual(await call('f', '"reads"'), { ok: true, output: 'read' });
      assert.equal(failure(await call('f', '"fail"')), 'FunctionError: exit status 1: second');
      // The worker's own /dev/null and err fds, closed by a call, are opened again.
      assert.deepEqual(await call('f', '"close"'), { ok: true, output: 'closed' });
      assert.deepEqual(await call('f', '"reads"'), { ok: true, output: 'read' });
      // The same with stdout sent elsewhere: the end line still reaches the caller (it once went
      // where the call's stdout went, and the call never ended).
      assert.deepEqual(await call('f', '"away"'), { ok: true, output: 'kept' });
      assert.deepEqual(await call('f', '"reads"'), { ok: true, output: 'read' });
      assert.equal(failure(await call('f', '"fail"')), 'FunctionError: exit status 1: second');
      // Calls that write no stderr leave its file as it is: the worker opened (emptied) it before
      // the first of them only. The pause lets the file system's clock tick (a few ms).
      const first = await call('f', '"stamp"');
      await sleep(50);
      assert.deepEqual(await call('f', '"stamp"'), first);
      assert.deepEqual(await call('f', '"warn"'), { ok: true, output: 'warned' });
      await sleep(50);
      assert.notDeepEqual(await call('f', '"stamp"'), first);
    });

    it("never sources the user's ~/.bashrc (bash -c with a socket as stdin would), in either worker", async () => {
      const home = dirWith('krt-home-', { '.bashrc': 'FROM_BASHRC=yes\n' });
      for (const isolation of [{}, { KRT_BASH_CALL_ISOLATION: 'subshell' }]) {
        const text = 'f() { printf "%s" "${FROM_BASHRC:-no}"; }\n';
        const { call } = await worker(text, ['f'], path, { HOME: home, ...isolation });
        assert.deepEqual(await call('f'), { ok: true, output: 'no' });
      }
    });

    it('reads each payload by its bytes in any locale: the worker started in one, or a call that switches it', async () => {
      const text = 'f() { [[ $1 == \'"utf8"\' ]] && export LC_ALL=C.UTF-8; printf "%s %s" "$1" "${#1}"; }\n';
      const p = JSON.stringify('h\u00e9 \u263a'); // 6 characters, 9 bytes
      const utf8 = await worker(text, ['f'], path, { LANG: 'C.UTF-8' });
      assert.deepEqual(await utf8.call('f', p), { ok: true, output: `${p} 6` });
      const c = await worker(text, ['f'], path);
      assert.deepEqual(await c.call('f', p), { ok: true, output: `${p} 9` });
      assert.deepEqual(await c.call('f', '"utf8"'), { ok: true, output: '"utf8" 6' });
      assert.deepEqual(await c.call('f', p), { ok: true, output: `${p} 6` });
      assert.deepEqual(await c.call('f', '"next"'), { ok: true, output: '"next" 6' });
    });

    it('keeps the variables a call sets for later calls, like a python module keeps its globals', async () => {
      const { call } = await worker('count=0\nf() { count=$((count + 1)); printf "%s" "$count"; }\n', ['f'], path);
      assert.deepEqual(
        [await call('f'), await call('f')],
        [
          { ok: true, output: 1 },
          { ok: true, output: 2 },
        ],
      );
    });

    it('a cancelled call and one with too much output end with their worker; the next call gets a new one', async () => {
      const { call, ...w } = await worker(
        bashCases({ '"spin"': 'while :; do :; done', '"big"': 'head -c 1100000 /dev/zero | tr "\\0" a' }),
        ['f'],
        path,
      );
      const spinning = call('f', '"spin"');
      await sleep(200);
      await w.cancel('f');
      assert.equal(failure(await spinning), 'Cancelled: the call was cancelled');
      assert.deepEqual(await call('f', '"a"'), { ok: true, output: 'a' });
      assert.equal(failure(await call('f', '"big"')), 'OutputTooLarge: output exceeds 1048576 bytes');
      assert.deepEqual(await call('f', '"b"'), { ok: true, output: 'b' });
    });
  });
