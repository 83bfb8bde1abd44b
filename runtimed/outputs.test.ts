import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import {
  MAX_OUTPUT_KEYS,
  MAX_OUTPUT_KEY_BYTES,
  MAX_OUTPUT_VALUE_BYTES,
  MAX_OUTPUTS_BYTES,
  parseOutputs,
  readOutputsFile,
  type OutputsResult,
} from './outputs.ts';

const parse = (s: string | Buffer): OutputsResult => parseOutputs(typeof s === 'string' ? Buffer.from(s, 'utf8') : s);

function expectOk(r: OutputsResult): Record<string, string> | undefined {
  assert.ok(r.ok, r.ok ? '' : `${r.reason}: ${r.message}`);
  return r.outputs;
}

function expectFail(r: OutputsResult, reason: string, message: string | RegExp): void {
  assert.equal(r.ok, false);
  if (r.ok) return;
  assert.equal(r.reason, reason);
  if (typeof message === 'string') assert.equal(r.message, message);
  else assert.match(r.message, message);
}

describe('runtimed/outputs parseOutputs', () => {
  it('parses KEY=VALUE lines, ignoring blank lines and comments, splitting at the first "="', () => {
    const out = expectOk(parse('# comment\n\n  a = 1 \r\nb=x=y\n   # indented comment\nc=\n'));
    assert.deepEqual(out, { a: '1', b: 'x=y', c: '' });
  });

  it('gives no outputs for an empty file or one with only comments', () => {
    assert.equal(expectOk(parse('')), undefined);
    assert.equal(expectOk(parse('\n\n# x\n  \t\n')), undefined);
  });

  it('lets the last duplicate win', () => {
    assert.deepEqual(expectOk(parse('k=1\nk=2\nj=3\nk=4')), { k: '4', j: '3' });
  });

  it('trims like Go strings.TrimSpace (U+0085 and NBSP trimmed, U+FEFF kept)', () => {
    assert.deepEqual(expectOk(parse('\u0085k\u00a0=\u3000v\u2028')), { k: 'v' });
    assert.deepEqual(expectOk(parse('\ufeffk=v')), { '\ufeffk': 'v' });
  });

  it('keeps "__proto__" and "constructor" as plain keys', () => {
    const out = expectOk(parse('__proto__=x\nconstructor=y'));
    assert.ok(out);
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
    assert.deepEqual(Object.keys(out).sort(), ['__proto__', 'constructor']);
    assert.equal(Object.getOwnPropertyDescriptor(out, '__proto__')?.value, 'x');
  });

  it('rejects a line without "=" naming its line number', () => {
    expectFail(parse('a=1\n# c\nnope\n'), 'OutputsInvalid', 'outputs line 3 must use KEY=VALUE format');
  });

  it('rejects an empty key', () => {
    expectFail(parse('a=1\n  =v'), 'OutputsInvalid', 'outputs line 2 has an empty key');
  });

  it('rejects invalid UTF-8 naming the line, even in a comment', () => {
    expectFail(
      parse(Buffer.concat([Buffer.from('a=1\n#'), Buffer.from([0xff, 0xfe]), Buffer.from('\n')])),
      'OutputsInvalid',
      'outputs line 2 is not valid UTF-8',
    );
  });

  it('enforces the key, value, count and total limits with OutputsTooLarge', () => {
    assert.ok(parse(`${'k'.repeat(MAX_OUTPUT_KEY_BYTES)}=v`).ok);
    expectFail(
      parse(`a=1\n${'k'.repeat(MAX_OUTPUT_KEY_BYTES + 1)}=v`),
      'OutputsTooLarge',
      'output key on line 2 exceeds 128 bytes',
    );
    assert.ok(parse(`k=${'v'.repeat(MAX_OUTPUT_VALUE_BYTES)}`).ok);
    expectFail(
      parse(`k=${'v'.repeat(MAX_OUTPUT_VALUE_BYTES + 1)}`),
      'OutputsTooLarge',
      'output value for "k" on line 1 exceeds 8192 bytes',
    );
    // multi-byte characters count as bytes
    expectFail(parse(`k=${'é'.repeat(MAX_OUTPUT_VALUE_BYTES / 2 + 1)}`), 'OutputsTooLarge', /exceeds 8192 bytes/);
    const keys = Array.from({ length: MAX_OUTPUT_KEYS }, (_, i) => `k${i}=v`);
    assert.equal(Object.keys(expectOk(parse(keys.join('\n'))) ?? {}).length, 64);
    expectFail(parse([...keys, 'extra=v'].join('\n')), 'OutputsTooLarge', 'outputs exceed 64 keys (line 65)');
    // re-assigning an existing key at the key limit is fine
    assert.ok(parse([...keys, 'k0=again'].join('\n')).ok);
    const big = Array.from({ length: 9 }, (_, i) => `k${i}=${'v'.repeat(MAX_OUTPUT_VALUE_BYTES - 3)}`);
    expectFail(parse(big.join('\n')), 'OutputsTooLarge', `outputs exceed ${MAX_OUTPUTS_BYTES} bytes (line 9)`);
  });

  it('accounts a replaced duplicate by its new size', () => {
    const lines = Array.from({ length: 8 }, (_, i) => `k${i}=${'v'.repeat(MAX_OUTPUT_VALUE_BYTES - 2)}`);
    assert.ok(parse(lines.join('\n')).ok);
    // 8 * 8192 = 65536 exactly; replacing k0 with a shorter value then adding a small key fits
    assert.ok(parse([...lines, 'k0=x', 'z=y'].join('\n')).ok);
    expectFail(parse([...lines, 'z=y'].join('\n')), 'OutputsTooLarge', /exceed 65536 bytes/);
  });

  it('round-trips any small map of clean keys and values', () => {
    const word = fc.string({ minLength: 1, maxLength: 20 }).filter((s) => /^[A-Za-z0-9_.-]+$/.test(s));
    const value = fc
      .string({ maxLength: 40 })
      .filter((s) => !/[\r\n]/.test(s) && s === s.trim() && Buffer.from(s).toString() === s);
    fc.assert(
      fc.property(fc.dictionary(word, value, { maxKeys: 64 }), (m) => {
        const text = Object.entries(m)
          .map(([k, v]) => `${k}=${v}`)
          .join('\n');
        const r = parse(text);
        assert.ok(r.ok);
        assert.deepEqual(r.outputs ?? {}, { ...m });
      }),
      { numRuns: 300 },
    );
  });

  it('never throws and only returns the two reasons on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), (bytes) => {
        const r = parseOutputs(Buffer.from(bytes));
        if (!r.ok) assert.ok(r.reason === 'OutputsInvalid' || r.reason === 'OutputsTooLarge');
      }),
      { numRuns: 500 },
    );
  });
});

describe('runtimed/outputs readOutputsFile', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'krt-outputs-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('treats a missing file as no outputs', async () => {
    assert.deepEqual(await readOutputsFile(join(dir, 'outputs')), { ok: true, outputs: undefined });
  });

  it('reads and parses a regular file', async () => {
    await writeFile(join(dir, 'outputs'), 'tests=passed\n');
    assert.deepEqual(await readOutputsFile(join(dir, 'outputs')), { ok: true, outputs: { tests: 'passed' } });
  });

  it('refuses a symlink, even to a valid file', async () => {
    await writeFile(join(dir, 'real'), 'a=1\n');
    await symlink(join(dir, 'real'), join(dir, 'outputs'));
    expectFail(
      await readOutputsFile(join(dir, 'outputs')),
      'OutputsInvalid',
      'outputs file must not be a symbolic link',
    );
  });

  it('refuses a directory and a FIFO without blocking', async () => {
    await mkdir(join(dir, 'outputs'));
    expectFail(await readOutputsFile(join(dir, 'outputs')), 'OutputsInvalid', 'outputs file must be a regular file');
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    expectFail(await readOutputsFile(join(dir, 'fifo')), 'OutputsInvalid', 'outputs file must be a regular file');
  });

  it('caps the read of a huge file with OutputsTooLarge', async () => {
    await writeFile(join(dir, 'outputs'), `# ${'x'.repeat(5000)}\na=1\n`);
    expectFail(await readOutputsFile(join(dir, 'outputs'), 4096), 'OutputsTooLarge', 'outputs file exceeds 4096 bytes');
    assert.ok((await readOutputsFile(join(dir, 'outputs'))).ok);
  });
});
