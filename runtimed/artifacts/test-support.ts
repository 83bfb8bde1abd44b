/** Helpers for the artifact tests: temp trees, tree snapshots and hand-built (malicious) tar archives. */
import assert from 'node:assert/strict';
import { chmod, lstat, mkdir, mkdtemp, readFile, readdir, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { isArtifactError } from './errors.ts';

/** Asserts that `p` rejects with an ArtifactError of `reason` whose message matches. */
export async function rejects(p: Promise<unknown>, reason: string, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isArtifactError(err), String(err));
    assert.equal(err.reason, reason);
    assert.match(err.message, message);
    return true;
  });
}

export function makeTmp(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `krt-${prefix}-`));
}

/** path → file content, or null for a directory. */
export type Tree = Record<string, string | null>;

export interface WriteTreeOptions {
  order?: string[];
  mtime?: Date;
  /** Extra mode per file path (applied with chmod). */
  modes?: Record<string, number>;
}

export async function writeTree(root: string, tree: Tree, opts: WriteTreeOptions = {}): Promise<void> {
  for (const path of opts.order ?? Object.keys(tree)) {
    const content = tree[path];
    const abs = join(root, path);
    if (content === null) {
      await mkdir(abs, { recursive: true });
    } else if (content !== undefined) {
      await mkdir(dirname(abs), { recursive: true });
      await writeFile(abs, content);
      if (opts.modes?.[path] !== undefined) await chmod(abs, opts.modes[path]);
    }
  }
  if (opts.mtime) for (const path of Object.keys(tree)) await utimes(join(root, path), opts.mtime, opts.mtime);
}

/** Snapshot: rel path → 'dir' or 'file <exec?> <content>'. */
export async function readTree(root: string, rel = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(join(root, rel))).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    const st = await lstat(join(root, path));
    if (st.isDirectory()) {
      out[path] = 'dir';
      Object.assign(out, await readTree(root, path));
    } else {
      out[path] = `file ${(st.mode & 0o111) !== 0 ? 'x' : '-'} ${(await readFile(join(root, path))).toString('utf8')}`;
    }
  }
  return out;
}

/** Random consistent trees: every proper prefix of a path is a directory. */
export const treeArb: fc.Arbitrary<Tree> = fc
  .array(
    fc.record({
      segs: fc.array(fc.constantFrom('a', 'b', 'B', 'é', 'x.txt', '_z', 'a.b', '日本'), { minLength: 1, maxLength: 3 }),
      content: fc.option(fc.string({ maxLength: 30 }), { nil: null }),
    }),
    { minLength: 1, maxLength: 12 },
  )
  .map((items) => {
    const tree: Tree = {};
    for (const { segs, content } of items) tree[segs.join('/')] = content;
    for (const path of Object.keys(tree)) {
      const segs = path.split('/');
      for (let i = 1; i < segs.length; i++) tree[segs.slice(0, i).join('/')] = null;
    }
    return tree;
  });

export interface RawEntry {
  name: string;
  /** typeflag character; '0' by default. */
  type?: string;
  data?: Buffer | string;
  /** Header size field, when it must differ from the data length. */
  size?: number;
  linkname?: string;
  mode?: number;
  magic?: 'ustar' | 'gnu' | 'none';
  prefix?: string;
  badChecksum?: boolean;
}

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

/** A tar header built independently of tar.ts, so the tests do not share its bugs. */
export function rawHeader(e: RawEntry, dataLength: number): Buffer {
  const b = Buffer.alloc(512);
  Buffer.from(e.name, 'utf8').copy(b, 0, 0, 100);
  b.write(octal(e.mode ?? 0o644, 8), 100, 'latin1');
  b.write(octal(0, 8), 108, 'latin1');
  b.write(octal(0, 8), 116, 'latin1');
  b.write(octal(e.size ?? dataLength, 12), 124, 'latin1');
  b.write(octal(0, 12), 136, 'latin1');
  b.write(e.type ?? '0', 156, 'latin1');
  if (e.linkname) Buffer.from(e.linkname, 'utf8').copy(b, 157, 0, 100);
  if (e.magic !== 'none') b.write(e.magic === 'gnu' ? 'ustar  \0' : 'ustar\x0000', 257, 'latin1');
  if (e.prefix) Buffer.from(e.prefix, 'utf8').copy(b, 345, 0, 155);
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of b) sum += byte;
  if (e.badChecksum) sum += 1;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}

export function rawTar(entries: RawEntry[], opts: { end?: boolean; trailer?: Buffer } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const data = typeof e.data === 'string' ? Buffer.from(e.data) : (e.data ?? Buffer.alloc(0));
    parts.push(rawHeader(e, data.length), data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  if (opts.end !== false) parts.push(Buffer.alloc(1024));
  if (opts.trailer) parts.push(opts.trailer);
  return Buffer.concat(parts);
}

export function rawTgz(entries: RawEntry[], opts: { end?: boolean; trailer?: Buffer } = {}): Buffer {
  return gzipSync(rawTar(entries, opts));
}

/** A PAX record "<len> key=value\n". */
export function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}
