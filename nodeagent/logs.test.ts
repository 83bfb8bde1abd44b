import assert from 'node:assert/strict';
import { writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../lib/fs/temp-dir.ts';
import { parseLine, parseQuery, selectRecords, streamLog } from './logs.ts';
import { LineLogger, exitCode, mountsEnv } from './container.ts';
import type { WriteStream } from 'node:fs';

const file = (lines: string[]): string =>
  lines.map((m, i) => `2026-01-01T00:00:0${i}.000Z stdout F ${m}`).join('\n') + '\n';

describe('node agent logs', () => {
  it('parses CRI lines, keeping spaces in messages', () => {
    assert.deepEqual(parseLine('2026-01-01T00:00:00Z stderr F a  b'), {
      time: '2026-01-01T00:00:00Z',
      stream: 'stderr',
      message: 'a  b',
    });
    assert.equal(parseLine('garbage'), undefined);
  });

  it('selects by tailLines and sinceTime', () => {
    const text = file(['a', 'b', 'c', 'd']);
    assert.deepEqual(
      selectRecords(text, parseQuery(new URLSearchParams('tailLines=2'), 0)).map((r) => r.message),
      ['c', 'd'],
    );
    assert.deepEqual(selectRecords(text, parseQuery(new URLSearchParams('tailLines=0'), 0)), []);
    assert.deepEqual(
      selectRecords(text, parseQuery(new URLSearchParams('sinceTime=2026-01-01T00:00:02Z'), 0)).map((r) => r.message),
      ['c', 'd'],
    );
    assert.throws(() => parseQuery(new URLSearchParams('tailLines=-1'), 0), /invalid tailLines/);
  });

  it('streams with timestamps and limitBytes, and follows until the container stops', async () => {
    const dir = tempDir('krt-logs-');
    const f = join(dir, '0.log');
    writeFileSync(f, file(['one', 'two']));
    let out = '';
    const sink = {
      write: (s: string) => {
        out += s;
        return true;
      },
      closed: () => false,
    };
    await streamLog(f, parseQuery(new URLSearchParams('limitBytes=6'), 0), sink, () => true);
    assert.equal(out, 'one\ntw');
    out = '';
    await streamLog(f, parseQuery(new URLSearchParams('timestamps=true&tailLines=1'), 0), sink, () => true);
    assert.equal(out, '2026-01-01T00:00:01.000Z two\n');
    out = '';
    let running = true;
    const p = streamLog(f, parseQuery(new URLSearchParams('follow=true'), 0), sink, () => !running);
    setTimeout(() => {
      appendFileSync(f, '2026-01-01T00:00:09.000Z stdout F three\n');
      running = false;
    }, 120);
    await p;
    assert.equal(out, 'one\ntwo\nthree\n');
  });

  it('writes CRI records and buffers partial lines', () => {
    let out = '';
    const l = new LineLogger(
      {
        write: (s: string) => {
          out += s;
          return true;
        },
      } as unknown as WriteStream,
      () => new Date(0),
    );
    l.write('stdout', Buffer.from('a\nb'));
    l.write('stdout', Buffer.from('c\n'));
    l.write('stderr', Buffer.from('tail'));
    l.flush();
    assert.equal(
      out,
      '1970-01-01T00:00:00.000Z stdout F a\n1970-01-01T00:00:00.000Z stdout F bc\n1970-01-01T00:00:00.000Z stderr F tail\n',
    );
  });

  it('maps signals to 128+n exit codes and validates mounts', () => {
    assert.equal(exitCode({ code: 3, signal: null, at: new Date() }), 3);
    assert.equal(exitCode({ code: null, signal: 'SIGKILL', at: new Date() }), 137);
    assert.equal(mountsEnv([{ hostPath: '/a', mountPath: '/b', readOnly: true }]), '/a\t/b\tro');
    assert.throws(() => mountsEnv([{ hostPath: '/a', mountPath: 'rel', readOnly: false }]), /absolute/);
  });
});
