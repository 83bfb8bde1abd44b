import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempDir } from '../../lib/fs/temp-dir.ts';
import { chooseCommand, withNorc } from './command.ts';
import { Execution, MIN_RECORD_COST, STREAM_LIMIT, TRUNCATED, type Summary } from './executions.ts';

async function run(script: string, env: Record<string, string> = {}): Promise<Execution> {
  const e = new Execution('t');
  const ended = once(e, 'end') as Promise<[Summary]>;
  e.start('bash', { id: 't', workingDir: tmpdir(), env, args: [script] }, { PATH: process.env.PATH });
  await ended;
  return e;
}

describe('runtimed/runtime-server Execution output bounds (issue 11 item 8)', () => {
  it('charges every line at least MIN_RECORD_COST: a flood of blank lines keeps at most STREAM_LIMIT/MIN_RECORD_COST records', async () => {
    // 2 MiB of newlines: 2M records (and ~500 MiB of JSON log records) without the per-record charge.
    const e = await run('head -c 2097152 /dev/zero | tr "\\0" "\\n"');
    const stdout = e.records.filter((r) => r.stream === 'stdout');
    assert.ok(stdout.length <= STREAM_LIMIT / MIN_RECORD_COST + 1, `${stdout.length} records`);
    assert.equal(stdout[stdout.length - 1]?.line, TRUNCATED);
    assert.equal(e.state, 'SUCCEEDED');
  });

  it('bounds one endless line without a newline', async () => {
    const e = await run('head -c 3145728 /dev/zero | tr "\\0" "x"');
    const bytes = e.records.reduce((n, r) => n + Buffer.byteLength(r.line), 0);
    assert.ok(bytes <= STREAM_LIMIT, `${bytes} bytes kept`);
    assert.equal(e.records[e.records.length - 1]?.line, TRUNCATED);
  });

  it('keeps ordinary output whole', async () => {
    const e = await run('for i in $(seq 1 1000); do echo "line $i"; done; echo err >&2');
    assert.equal(e.records.filter((r) => r.stream === 'stdout').length, 1000);
    assert.deepEqual(
      e.records.filter((r) => r.stream === 'stderr').map((r) => r.line),
      ['err'],
    );
  });
});

describe('runtimed/runtime-server bash commands never source ~/.bashrc', () => {
  it('puts --norc first in every bash argv, and nowhere else', () => {
    assert.deepEqual(withNorc(['bash', '-c', 'x']), ['bash', '--norc', '-c', 'x']);
    assert.deepEqual(withNorc(['/bin/bash', '-x', 'f']), ['/bin/bash', '--norc', '-x', 'f']);
    assert.deepEqual(withNorc(['bash', '--norc', '-c', 'x']), ['bash', '--norc', '-c', 'x']);
    assert.deepEqual(withNorc(['sh', '-c', 'x']), ['sh', '-c', 'x']);
    const choice = chooseCommand('bash', { id: 'i', workingDir: '/w', args: ['bash', '-c', 'x'] }, () => false);
    assert.deepEqual(choice, { ok: true, argv: ['bash', '--norc', '-c', 'x'] });
  });

  it('an execution (`bash -c`) with SSH_CLIENT set does not run ~/.bashrc, as bash would for sshd', async () => {
    const home = tempDir('krt-home-');
    writeFileSync(join(home, '.bashrc'), 'echo FROM_BASHRC\n');
    const e = await run('echo ran', { HOME: home, SSH_CLIENT: '10.0.0.1 50000 22' });
    assert.deepEqual(
      e.records.map((r) => r.line),
      ['ran'],
    );
  });
});
