import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  archiveNames,
  ImageImportError,
  importImageArchives,
  inspectArchive,
  kubeletContainerd,
  normalizeRef,
} from './image-import.ts';
import { kubeletLayout } from './kubelet-config.ts';
import { contentBlobPath } from './kubelet-images.ts';

const reason = (r: string) => (err: unknown) => err instanceof ImageImportError && err.reason === r;

describe('krt local image import', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'krt-image-import-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** An OCI layout directory (metadata only: the import itself is containerd's). */
  const layout = (name: string, annotations: Record<string, string>): string => {
    const p = join(dir, name);
    mkdirSync(join(p, 'blobs', 'sha256'), { recursive: true });
    writeFileSync(join(p, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
    writeFileSync(join(p, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ annotations }] }));
    return p;
  };
  const tarOf = (src: string, name: string): string => {
    const out = join(dir, name);
    execFileSync('tar', ['-C', src, '-cf', out, '.']);
    return out;
  };
  const state = (s: object): string => {
    const root = join(dir, 'env');
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, 'state.json'), JSON.stringify({ root, ...s }));
    return root;
  };

  it('names images as containerd and the kubelet do', () => {
    assert.equal(normalizeRef('bash:5'), 'docker.io/library/bash:5');
    assert.equal(normalizeRef('bash'), 'docker.io/library/bash:latest');
    assert.equal(normalizeRef('user/x'), 'docker.io/user/x:latest');
    assert.equal(normalizeRef('ghcr.io/kruntimes/up:dev'), 'ghcr.io/kruntimes/up:dev');
    assert.equal(normalizeRef('localhost/x@sha256:ab'), 'localhost/x@sha256:ab');
    assert.equal(normalizeRef('registry:5000/x'), 'registry:5000/x:latest');
  });

  it('reads the names of an OCI index and of a docker save manifest, and refuses unnamed images', () => {
    const oci = (annotations: Record<string, string>): { manifests: object[] } => ({ manifests: [{ annotations }] });
    assert.deepEqual(archiveNames(oci({ 'io.containerd.image.name': 'ghcr.io/a/b:1' }), undefined), ['ghcr.io/a/b:1']);
    assert.deepEqual(archiveNames(oci({ 'org.opencontainers.image.ref.name': 'quay.io/a/b:2' }), undefined), [
      'quay.io/a/b:2',
    ]);
    assert.throws(
      () => archiveNames(oci({ 'org.opencontainers.image.ref.name': 'latest' }), undefined),
      reason('BadArchive'),
    );
    assert.throws(() => archiveNames({ manifests: [] }, undefined), reason('BadArchive'));
    assert.deepEqual(archiveNames(undefined, [{ RepoTags: ['bash:5', 'x/y:1'] }]), [
      'docker.io/library/bash:5',
      'docker.io/x/y:1',
    ]);
    assert.throws(() => archiveNames(undefined, [{ RepoTags: null }]), reason('BadArchive'));
    assert.throws(() => archiveNames(undefined, undefined), reason('BadArchive'));
  });

  it('inspects an OCI layout directory, its tar and a docker save tar; refuses anything else', () => {
    const l = layout('l', { 'io.containerd.image.name': 'ghcr.io/kruntimes/up:dev' });
    assert.deepEqual(inspectArchive(l), { path: l, kind: 'layout', names: ['ghcr.io/kruntimes/up:dev'] });
    const t = tarOf(l, 'l.tar');
    assert.deepEqual(inspectArchive(t), { path: t, kind: 'tar', names: ['ghcr.io/kruntimes/up:dev'] });
    const d = join(dir, 'docker');
    mkdirSync(d);
    writeFileSync(join(d, 'manifest.json'), JSON.stringify([{ RepoTags: ['bash:5'] }]));
    assert.deepEqual(inspectArchive(tarOf(d, 'd.tar')).names, ['docker.io/library/bash:5']);
    writeFileSync(join(dir, 'plain.txt'), 'not a tar');
    assert.throws(() => inspectArchive(join(dir, 'plain.txt')), reason('BadArchive'));
    assert.throws(() => inspectArchive(join(dir, 'docker')), reason('BadArchive'));
    assert.throws(() => inspectArchive(join(dir, 'absent')), reason('BadArchive'));
  });

  it('needs a running environment of the kubelet kind', () => {
    assert.throws(() => kubeletContainerd(join(dir, 'none')), reason('NoEnvironment'));
    assert.throws(() => kubeletContainerd(state({ nodeKind: 'agent', pids: {} })), reason('NotKubeletKind'));
    assert.throws(() => kubeletContainerd(state({ pids: {} })), reason('NotKubeletKind'));
    const dead = state({ nodeKind: 'kubelet', kubelet: { binDir: dir }, pids: { containerd: 2 ** 22 + 1 } });
    assert.throws(() => kubeletContainerd(dead), reason('NotRunning'));
  });

  describe('with a stand-in ctr (the real one runs in e2e/kubelet/node.kubelet.ts)', () => {
    let log: string;
    let listed: string;
    let root: string;
    beforeEach(() => {
      log = join(dir, 'ctr.log');
      listed = join(dir, 'listed');
      const bin = join(dir, 'bin');
      mkdirSync(bin);
      writeFileSync(
        join(bin, 'ctr'),
        '#!/bin/sh\necho "$*" >> "$FAKE_CTR_LOG"\n[ "$6" = ls ] && cat "$FAKE_CTR_LISTED"\n[ "$7" = - ] && tar -tf - >> "$FAKE_CTR_LOG.stdin"\nexit 0\n',
      );
      chmodSync(join(bin, 'ctr'), 0o755);
      process.env.FAKE_CTR_LOG = log;
      process.env.FAKE_CTR_LISTED = listed;
      root = state({ nodeKind: 'kubelet', kubelet: { binDir: bin }, pids: { containerd: process.pid } });
    });
    afterEach(() => {
      delete process.env.FAKE_CTR_LOG;
      delete process.env.FAKE_CTR_LISTED;
    });
    const calls = (): string[] => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []);

    it('imports every archive into the k8s.io namespace of the environment containerd and checks the names', () => {
      const l = layout('l', { 'io.containerd.image.name': 'ghcr.io/kruntimes/up:dev' });
      const t = tarOf(layout('m', { 'io.containerd.image.name': 'ghcr.io/kruntimes/other:1' }), 'm.tar');
      writeFileSync(listed, 'ghcr.io/kruntimes/up:dev\nghcr.io/kruntimes/other:1\n');
      assert.deepEqual(importImageArchives(root, [l, t]), ['ghcr.io/kruntimes/up:dev', 'ghcr.io/kruntimes/other:1']);
      const socket = kubeletLayout(root).containerdSocket;
      assert.deepEqual(calls(), [
        `--address ${socket} -n k8s.io images import -`,
        `--address ${socket} -n k8s.io images import ${t}`,
        `--address ${socket} -n k8s.io images ls -q`,
      ]);
    });

    it('leaves out of the stream the blobs the environment content store already has', () => {
      const l = layout('l', { 'io.containerd.image.name': 'ghcr.io/kruntimes/up:dev' });
      for (const hex of ['aa', 'bb']) writeFileSync(join(l, 'blobs', 'sha256', hex), hex);
      const store = contentBlobPath(kubeletLayout(root).containerdRoot, 'sha256:aa');
      mkdirSync(join(store, '..'), { recursive: true });
      writeFileSync(store, 'aa');
      writeFileSync(listed, 'ghcr.io/kruntimes/up:dev\n');
      importImageArchives(root, [l]);
      const sent = readFileSync(`${log}.stdin`, 'utf8').split('\n');
      assert.ok(sent.includes('./blobs/sha256/bb'), sent.join(' '));
      assert.ok(sent.includes('./index.json'));
      assert.ok(!sent.includes('./blobs/sha256/aa'), sent.join(' '));
    });

    it('imports nothing when one archive is bad', () => {
      const l = layout('l', { 'io.containerd.image.name': 'ghcr.io/kruntimes/up:dev' });
      const bad = layout('bad', { 'org.opencontainers.image.ref.name': 'latest' });
      assert.throws(() => importImageArchives(root, [l, bad]), reason('BadArchive'));
      assert.throws(() => importImageArchives(root, []), reason('BadArchive'));
      assert.deepEqual(calls(), []);
    });

    it('fails when containerd does not list an image afterwards', () => {
      writeFileSync(listed, '');
      const l = layout('l', { 'io.containerd.image.name': 'ghcr.io/kruntimes/up:dev' });
      assert.throws(() => importImageArchives(root, [l]), reason('ImportFailed'));
    });
  });
});
