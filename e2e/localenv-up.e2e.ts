/**
 * A local environment's `up` that fails partway stops what it started (etcd and the API server
 * here): before, a failed start left them running and every caller had to call down() itself.
 * The environment is its own, small one (no install, no node agent); the failure is a broken
 * kube-controller-manager binary that exits at once (noticed only at its 60 s health timeout:
 * ensureRunning's "exited" check error is swallowed by waitFor), about 70 s in all.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { down, readState, up } from '../localenv/environment.ts';
import { isAlive } from '../localenv/process.ts';

describe('krt local: a failed up() stops what it started', function () {
  this.timeout(180_000);
  let root: string;
  let bin: string;
  before(function () {
    const real = process.env.KRT_BIN_DIR;
    if (!real) this.skip(); // set by scripts/test.sh (bash scripts/build-control-plane.sh)
    root = mkdtempSync(join(tmpdir(), 'krt-upfail-'));
    bin = mkdtempSync(join(tmpdir(), 'krt-upfail-bin-'));
    for (const c of ['etcd', 'kube-apiserver', 'kubectl']) symlinkSync(join(real, c), join(bin, c));
    writeFileSync(join(bin, 'kube-controller-manager'), '#!/bin/sh\necho "broken on purpose" >&2\nexit 3\n');
    chmodSync(join(bin, 'kube-controller-manager'), 0o755);
  });
  after(async () => {
    if (root) await down(root, { purge: true });
    if (bin) rmSync(bin, { recursive: true, force: true });
  });

  it('stops etcd and kube-apiserver when kube-controller-manager cannot start', async () => {
    const seen = new Map<string, number>();
    const progress = (): void => {
      for (const [c, pid] of Object.entries(readState(root)?.pids ?? {})) if (pid) seen.set(c, pid);
    };
    await assert.rejects(
      up({ root, nodes: ['upfail'], binDir: bin, install: false, progress }),
      /kube-controller-manager/,
    );
    assert.ok(seen.has('etcd') && seen.has('kube-apiserver'), `started: ${[...seen.keys()].join(', ')}`);
    for (const [c, pid] of seen) assert.equal(isAlive(pid), false, `${c} (pid ${pid}) is still running`);
    assert.deepEqual(readState(root)?.pids, {});
  });
});
