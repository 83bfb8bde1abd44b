import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FollowedFiles } from './followed-files.ts';

const until = async (ok: () => boolean): Promise<void> => {
  for (let i = 0; i < 250 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
};

describe('FollowedFiles', () => {
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'krt-follow-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('sees a change made right after it started, hands over the new contents, and reports a missing file once', async () => {
    const a = join(dir, 'a');
    const b = join(dir, 'b');
    writeFileSync(a, 'cert-1');
    writeFileSync(b, 'key-1');
    const changes: string[][] = [];
    const errors: unknown[] = [];
    const f = new FollowedFiles(
      [a, b],
      10,
      (c) => changes.push(c.map(String)),
      (e) => errors.push(e),
    );
    try {
      assert.deepEqual(f.contents.map(String), ['cert-1', 'key-1']);
      writeFileSync(b, 'key-2');
      await until(() => changes.length > 0);
      assert.deepEqual(changes, [['cert-1', 'key-2']]);
      assert.deepEqual(f.contents.map(String), ['cert-1', 'key-2']);
      rmSync(a);
      await until(() => errors.length > 0);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(errors.length, 1);
      writeFileSync(a, 'cert-3');
      await until(() => changes.length > 1);
      assert.deepEqual(changes[1], ['cert-3', 'key-2']);
    } finally {
      f.stop();
    }
  });

  it('calls nothing while the contents stay the same (a rewrite with the same bytes)', async () => {
    const a = join(dir, 'a');
    writeFileSync(a, 'same');
    let calls = 0;
    const f = new FollowedFiles([a], 10, () => calls++);
    try {
      writeFileSync(a, 'same');
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(calls, 0);
    } finally {
      f.stop();
    }
  });
});
