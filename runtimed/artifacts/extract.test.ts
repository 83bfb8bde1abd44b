import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { archiveDirectory } from './archive.ts';
import { isArtifactError } from './errors.ts';
import { entrySegments, extractArchive, stageFile, writeStreamAtomically } from './extract.ts';
import {
  makeTmp,
  paxRecord,
  rawTar,
  rawTgz,
  readTree,
  rejects,
  treeArb,
  type RawEntry,
  writeTree,
} from './test-support.ts';

describe('runtimed/artifacts extractArchive', () => {
  let base: string;
  let work: string;
  let dest: string;
  beforeEach(async () => {
    base = await makeTmp('extract');
    work = join(base, 'work');
    dest = join(work, 'out');
    await mkdir(work);
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  async function extractRaw(
    entries: RawEntry[],
    limits = {},
    opts: { end?: boolean; trailer?: Buffer } = {},
  ): Promise<void> {
    await writeFile(join(base, 'in.tgz'), rawTgz(entries, opts));
    await extractArchive(join(base, 'in.tgz'), dest, limits);
  }

  /** Nothing at the destination, nothing beside it, nothing outside the work dir. */
  async function assertUntouched(): Promise<void> {
    assert.deepEqual(await readdir(work), [], 'no destination or temporary directory left');
    assert.deepEqual((await readdir(base)).sort(), ['in.tgz', 'work']);
  }

  it('round-trips any tree through archiveDirectory and extractArchive', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(treeArb, async (tree) => {
        const src = join(base, `src-${n}`);
        const out = join(work, `out-${n}`);
        await writeTree(src, tree);
        await archiveDirectory(src, join(base, `a-${n}.tgz`));
        await extractArchive(join(base, `a-${n++}.tgz`), out);
        assert.deepEqual(await readTree(out), await readTree(src));
      }),
      { numRuns: 30 },
    );
  });

  it('accepts implicit parents, a "./" root entry and ./-prefixed names, mapping exec bits', async () => {
    await extractRaw([
      { name: './', type: '5' },
      { name: './bin/tool', data: 'x', mode: 0o4750 },
      { name: 'deep/er/file.txt', data: 'hello' },
      { name: 'deep/', type: '5' },
      { name: 'empty/', type: '5' },
    ]);
    assert.deepEqual(await readTree(dest), {
      bin: 'dir',
      'bin/tool': 'file x x',
      deep: 'dir',
      'deep/er': 'dir',
      'deep/er/file.txt': 'file - hello',
      empty: 'dir',
    });
    assert.equal((await stat(join(dest, 'bin/tool'))).mode & 0o7777, 0o755, 'setuid dropped');
    assert.equal((await stat(dest)).mode & 0o777, 0o755);
  });

  const malicious: [string, RawEntry[], RegExp][] = [
    [
      'a symlink',
      [
        { name: 'ok.txt', data: 'ok' },
        { name: 'link', type: '2', linkname: '/etc/passwd' },
      ],
      /^entry "link": symbolic links are not allowed$/,
    ],
    [
      'a symlink then a file through it',
      [
        { name: 'dir', type: '2', linkname: '..' },
        { name: 'dir/escape', data: 'x' },
      ],
      /entry "dir": symbolic links are not allowed/,
    ],
    [
      'a hard link',
      [
        { name: 'a', data: 'a' },
        { name: 'h', type: '1', linkname: 'a' },
      ],
      /^entry "h": hard links are not allowed$/,
    ],
    [
      'a hard link to an absolute target',
      [{ name: 'h', type: '1', linkname: '/etc/shadow' }],
      /hard links are not allowed/,
    ],
    ['a character device', [{ name: 'null', type: '3' }], /^entry "null": character devices are not allowed$/],
    ['a block device', [{ name: 'sda', type: '4' }], /block devices are not allowed/],
    ['a FIFO', [{ name: 'p', type: '6' }], /^entry "p": FIFOs are not allowed$/],
    ['an unknown type', [{ name: 's', type: 'S' }], /unsupported entry type "S"/],
    ['an absolute path', [{ name: '/tmp/evil', data: 'x' }], /^entry "\/tmp\/evil": absolute paths are not allowed$/],
    ['a ".." segment', [{ name: '../evil', data: 'x' }], /^entry "..\/evil": ".." path segments are not allowed$/],
    ['a nested ".." segment', [{ name: 'a/../../evil', data: 'x' }], /".." path segments are not allowed/],
    ['a ".." that stays inside', [{ name: 'a/../b', data: 'x' }], /".." path segments are not allowed/],
    ['a ".." directory entry', [{ name: '../', type: '5' }], /".." path segments are not allowed/],
    [
      'a ".." in the ustar prefix',
      [{ name: 'evil', prefix: '..', data: 'x' }],
      /^entry "..\/evil": ".." path segments are not allowed$/,
    ],
    ['a backslash', [{ name: '..\\evil', data: 'x' }], /backslashes are not allowed/],
    [
      'a duplicate file',
      [
        { name: 'a', data: '1' },
        { name: './a', data: '2' },
      ],
      /^entry ".\/a": duplicate entry$/,
    ],
    [
      'a directory over a file',
      [
        { name: 'a', data: '1' },
        { name: 'a/', type: '5' },
      ],
      /duplicate entry/,
    ],
    [
      'a file below a file',
      [
        { name: 'a', data: '1' },
        { name: 'a/b', data: '2' },
      ],
      /^entry "a\/b": conflicts with file "a"$/,
    ],
    [
      'a file over an implicit directory',
      [
        { name: 'a/b', data: '1' },
        { name: 'a', data: '2' },
      ],
      /^entry "a": conflicts with an existing directory$/,
    ],
    ['a directory with content', [{ name: 'd/', type: '5', data: 'x' }], /directory entry has content/],
    [
      'a PAX path with ".."',
      [
        { name: 'PaxHeader', type: 'x', data: paxRecord('path', '../pax-evil') },
        { name: 'innocent', data: 'x' },
      ],
      /^entry "..\/pax-evil": ".." path segments are not allowed$/,
    ],
    [
      'a PAX absolute path',
      [
        { name: 'PaxHeader', type: 'x', data: paxRecord('path', '/abs') },
        { name: 'innocent', data: 'x' },
      ],
      /absolute paths are not allowed/,
    ],
    [
      'a GNU long name with ".."',
      [
        { name: '././@LongLink', type: 'L', data: '../../long-evil\0' },
        { name: 'innocent', data: 'x' },
      ],
      /^entry "..\/..\/long-evil": ".." path segments/,
    ],
    [
      'a GNU long link name',
      [{ name: '././@LongLink', type: 'K', data: '/etc/passwd\0' }],
      /link entries are not allowed/,
    ],
    [
      'a global PAX header',
      [{ name: 'g', type: 'g', data: paxRecord('path', 'x') }],
      /global extended headers are not supported/,
    ],
    [
      'a malformed PAX header',
      [
        { name: 'PaxHeader', type: 'x', data: '99 path=x\n' },
        { name: 'f', data: 'x' },
      ],
      /malformed extended header/,
    ],
    [
      'repeated long names',
      [
        { name: 'L', type: 'L', data: 'a\0' },
        { name: 'L', type: 'L', data: 'b\0' },
        { name: 'f', data: 'x' },
      ],
      /repeated extended header/,
    ],
    [
      'a NUL in a PAX path',
      [
        { name: 'PaxHeader', type: 'x', data: paxRecord('path', 'a\0b') },
        { name: 'f', data: 'x' },
      ],
      /name contains NUL/,
    ],
    [
      'an invalid UTF-8 name',
      [
        {
          name: 'PaxHeader',
          type: 'x',
          data: Buffer.concat([Buffer.from('12 path='), Buffer.from([0xff, 0xfe, 0x41]), Buffer.from('\n')]),
        },
        { name: 'f', data: 'x' },
      ],
      /name is not valid UTF-8/,
    ],
    [
      'a bad checksum',
      [
        { name: 'ok', data: 'x' },
        { name: 'bad', data: 'x', badChecksum: true },
      ],
      /^archive entry #2: invalid header checksum$/,
    ],
    ['a non-ustar header', [{ name: 'v7', data: 'x', magic: 'none' }], /not a ustar archive/],
    [
      'a path that is too long',
      [
        { name: 'L', type: 'L', data: `${'a/'.repeat(2100)}f\0` },
        { name: 'f', data: 'x' },
      ],
      /path is too long/,
    ],
  ];

  for (const [what, entries, message] of malicious) {
    it(`rejects ${what} and writes nothing`, async () => {
      await rejects(extractRaw(entries), 'ArtifactInputInvalid', message);
      await assertUntouched();
      assert.deepEqual(await readdir(join(base, '..')).then((l) => l.filter((n) => /evil/.test(n))), []);
    });
  }

  it('rejects a zip bomb by decompressed content size before writing it', async () => {
    await rejects(
      extractRaw(
        [
          { name: 'small', data: 'x' },
          { name: 'bomb', data: Buffer.alloc(3 * 1024 * 1024) },
        ],
        { maxBytes: 1024 * 1024 },
      ),
      'ArtifactInputInvalid',
      /^archive content exceeds 1048576 bytes$/,
    );
    await assertUntouched();
  });

  it('rejects too many entries', async () => {
    const entries = Array.from({ length: 11 }, (_, i): RawEntry => ({ name: `d${i}/`, type: '5' }));
    await rejects(
      extractRaw(entries, { maxEntries: 10 }),
      'ArtifactInputInvalid',
      /^archive has more than 10 entries$/,
    );
    await assertUntouched();
  });

  it('rejects truncated archives, missing end markers and trailing garbage', async () => {
    const full = rawTar([{ name: 'f', data: 'x'.repeat(2000) }]);
    await writeFile(join(base, 'in.tgz'), gzipSync(full.subarray(0, 1200)));
    await rejects(extractArchive(join(base, 'in.tgz'), dest), 'ArtifactInputInvalid', /archive is truncated/);
    await assertUntouched();
    await rejects(
      extractRaw([{ name: 'f', data: 'x' }], {}, { end: false }),
      'ArtifactInputInvalid',
      /without an end-of-archive marker/,
    );
    await assertUntouched();
    await rejects(
      extractRaw([{ name: 'f', data: 'x' }], {}, { trailer: Buffer.from('garbage') }),
      'ArtifactInputInvalid',
      /unexpected data after the end-of-archive marker/,
    );
    await assertUntouched();
  });

  it('rejects data that is not gzip', async () => {
    await writeFile(join(base, 'in.tgz'), rawTar([{ name: 'f', data: 'x' }]));
    await rejects(
      extractArchive(join(base, 'in.tgz'), dest),
      'ArtifactInputInvalid',
      /^archive is not a valid gzip stream/,
    );
    await assertUntouched();
  });

  it('refuses an existing destination and leaves it untouched', async () => {
    await mkdir(dest);
    await writeFile(join(dest, 'keep'), 'keep');
    await writeFile(join(base, 'in.tgz'), rawTgz([{ name: 'keep', data: 'overwritten' }]));
    await rejects(extractArchive(join(base, 'in.tgz'), dest), 'ArtifactInputInvalid', /already exists/);
    assert.equal(await readFile(join(dest, 'keep'), 'utf8'), 'keep');
    await symlink(base, join(work, 'link'));
    await rejects(extractArchive(join(base, 'in.tgz'), join(work, 'link')), 'ArtifactInputInvalid', /already exists/);
  });

  it('validates entry names as pure functions', () => {
    assert.deepEqual(entrySegments('./a//b/./c/', '/root'), ['a', 'b', 'c']);
    assert.deepEqual(entrySegments('./', '/root'), []);
    for (const bad of ['', '/x', '../x', 'a/..', 'a\\b', 'a\0b'])
      assert.throws(
        () => entrySegments(bad, '/root'),
        (e: unknown) => isArtifactError(e, 'ArtifactInputInvalid'),
      );
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (name) => {
        try {
          const segs = entrySegments(name, '/root');
          assert.ok(!segs.includes('..') && !name.startsWith('/'));
        } catch (err) {
          assert.ok(isArtifactError(err, 'ArtifactInputInvalid'));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('never throws anything but ArtifactInputInvalid and never leaves files for random bytes', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 3000 }), fc.boolean(), async (bytes, gz) => {
        const file = join(base, `r${n}.bin`);
        await writeFile(file, gz ? gzipSync(Buffer.from(bytes)) : Buffer.from(bytes));
        const out = join(work, `r${n++}`);
        try {
          await extractArchive(file, out);
          await rm(out, { recursive: true });
        } catch (err) {
          assert.ok(isArtifactError(err, 'ArtifactInputInvalid'), String(err));
        }
        assert.deepEqual(await readdir(work), []);
      }),
      { numRuns: 150 },
    );
  });
});

describe('runtimed/artifacts stageFile and writeStreamAtomically', () => {
  let base: string;
  beforeEach(async () => {
    base = await makeTmp('stagefile');
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('copies a regular file and reports its digest', async () => {
    await writeFile(join(base, 'src'), 'payload');
    const r = await stageFile(join(base, 'src'), join(base, 'dst'));
    assert.equal(await readFile(join(base, 'dst'), 'utf8'), 'payload');
    assert.equal(r.sizeBytes, 7);
    assert.match(r.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal((await stat(join(base, 'dst'))).mode & 0o777, 0o644);
  });

  it('refuses a symlinked or special source, an existing destination and oversize content', async () => {
    await writeFile(join(base, 'real'), 'secret');
    await symlink(join(base, 'real'), join(base, 'link'));
    await rejects(
      stageFile(join(base, 'link'), join(base, 'd1')),
      'ArtifactInputInvalid',
      /symbolic links are not allowed/,
    );
    execFileSync('mkfifo', [join(base, 'fifo')]);
    await rejects(stageFile(join(base, 'fifo'), join(base, 'd2')), 'ArtifactInputInvalid', /not a regular file/);
    await symlink(join(base, 'real'), join(base, 'dlink'));
    await rejects(stageFile(join(base, 'real'), join(base, 'dlink')), 'ArtifactInputInvalid', /already exists/);
    await rejects(
      stageFile(join(base, 'real'), join(base, 'd3'), { maxBytes: 3 }),
      'ArtifactInputInvalid',
      /exceeds 3 bytes/,
    );
    assert.deepEqual((await readdir(base)).sort(), ['dlink', 'fifo', 'link', 'real']);
    assert.equal(await readFile(join(base, 'real'), 'utf8'), 'secret');
  });

  it('verifies size and digest before publishing and leaves nothing on mismatch', async () => {
    await rejects(
      writeStreamAtomically(Readable.from([Buffer.from('abc')]), join(base, 'x'), { expectedSize: 4 }),
      'ArtifactInputInvalid',
      /size 3 does not match the reference size 4/,
    );
    await rejects(
      writeStreamAtomically(Readable.from([Buffer.from('abc')]), join(base, 'x'), {
        expectedDigest: `sha256:${'0'.repeat(64)}`,
      }),
      'ArtifactInputInvalid',
      /does not match the reference digest/,
    );
    await rejects(
      writeStreamAtomically(Readable.from([Buffer.from('abcdef')]), join(base, 'x'), { maxBytes: 5 }),
      'ArtifactInputInvalid',
      /content exceeds 5 bytes/,
    );
    assert.deepEqual(await readdir(base), []);
  });
});
