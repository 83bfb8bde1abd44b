/**
 * `krt local image import`: images this checkout does not build, imported into the kubelet node
 * kind's containerd (namespace k8s.io), as `kind load image-archive` does for kind. An archive is
 * an OCI image layout (a directory with `oci-layout` and `index.json`), its tar, or a
 * `docker save` tar. Nothing is pulled: Pods name the imported tags with `imagePullPolicy:
 * IfNotPresent` (or `Never`). Every archive is checked before the first is imported, so a bad
 * one imports nothing. The node agent runs `images/<name>/image.json` on the host and has no
 * image store, so it refuses (docs/kubelet-node.md).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { readState } from './environment.ts';
import { kubeletLayout } from './kubelet-config.ts';
import { contentBlobPath } from './kubelet-images.ts';
import { isAlive } from './process.ts';

export type ImageImportReason = 'NoEnvironment' | 'NotKubeletKind' | 'NotRunning' | 'BadArchive' | 'ImportFailed';

export class ImageImportError extends Error {
  constructor(
    readonly reason: ImageImportReason,
    message: string,
  ) {
    super(message);
    this.name = 'ImageImportError';
  }
}

export interface ArchiveInfo {
  path: string;
  /** An OCI layout directory, or a tar file (OCI layout or docker save). */
  kind: 'layout' | 'tar';
  /** The image names containerd gives the archive's images, as Pods name them. */
  names: string[];
}

interface OciIndex {
  manifests?: { annotations?: Record<string, string> }[];
}
type DockerManifest = { RepoTags?: string[] | null }[];

/**
 * An image reference as containerd's CRI stores it: `bash:5` → `docker.io/library/bash:5`,
 * `user/x` → `docker.io/user/x:latest`, a registry host (a `.`, a `:` or `localhost`) kept.
 */
export function normalizeRef(ref: string): string {
  const slash = ref.indexOf('/');
  const first = slash < 0 ? '' : ref.slice(0, slash);
  const hasHost = slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  let out = hasHost ? ref : slash < 0 ? `docker.io/library/${ref}` : `docker.io/${ref}`;
  const last = out.slice(out.lastIndexOf('/') + 1);
  if (!last.includes(':') && !last.includes('@')) out = `${out}:latest`;
  return out;
}

/** A full reference: a repository path with a tag or digest (an OCI `ref.name` like `latest` is not). */
const fullRef = (name: string): boolean => /^[a-z0-9][^\s]*\/[^\s]*[:@][^\s/]+$/.test(name);

/**
 * The image names of an archive from its `index.json` (OCI: `io.containerd.image.name`, else a
 * full-reference `org.opencontainers.image.ref.name`) or its `manifest.json` (docker save:
 * `RepoTags`). An image without a usable name would be imported unnamed, so it is refused.
 */
export function archiveNames(index: OciIndex | undefined, docker: DockerManifest | undefined): string[] {
  if (index) {
    const manifests = index.manifests ?? [];
    if (manifests.length === 0) throw new ImageImportError('BadArchive', 'index.json lists no image');
    return manifests.map((m) => {
      const name = m.annotations?.['io.containerd.image.name'] ?? m.annotations?.['org.opencontainers.image.ref.name'];
      if (!name || !fullRef(name))
        throw new ImageImportError(
          'BadArchive',
          `an image in index.json has no full name (${name ?? 'none'}): annotate it with io.containerd.image.name`,
        );
      return normalizeRef(name);
    });
  }
  if (docker) {
    const tags = docker.flatMap((m) => m.RepoTags ?? []);
    if (tags.length === 0) throw new ImageImportError('BadArchive', 'manifest.json names no image (no RepoTags)');
    return tags.map(normalizeRef);
  }
  throw new ImageImportError(
    'BadArchive',
    'neither an OCI layout (index.json) nor a docker save archive (manifest.json)',
  );
}

function parseJson<T>(text: string | undefined, what: string): T | undefined {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ImageImportError('BadArchive', `${what} is not JSON`);
  }
}

/** The top-level metadata files of a tar archive (`index.json`, `./index.json`, ...). */
function tarMember(path: string, entries: string[], name: string): string | undefined {
  const entry = entries.find((e) => e === name || e === `./${name}`);
  if (entry === undefined) return undefined;
  return execFileSync('tar', ['-xOf', path, entry], { encoding: 'utf8', maxBuffer: 16 << 20 });
}

/** What an archive is and the names its images get; refuses anything it cannot import. */
export function inspectArchive(path: string): ArchiveInfo {
  if (!existsSync(path)) throw new ImageImportError('BadArchive', `${path}: no such file or directory`);
  if (statSync(path).isDirectory()) {
    if (!existsSync(join(path, 'oci-layout')))
      throw new ImageImportError('BadArchive', `${path}: a directory without oci-layout is not an OCI image layout`);
    const index = parseJson<OciIndex>(readFileSync(join(path, 'index.json'), 'utf8'), `${path}/index.json`);
    return { path, kind: 'layout', names: withPath(path, () => archiveNames(index, undefined)) };
  }
  const listed = spawnSync('tar', ['-tf', path], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (listed.status !== 0) throw new ImageImportError('BadArchive', `${path}: not a tar archive`);
  const entries = listed.stdout.split('\n');
  const index = parseJson<OciIndex>(tarMember(path, entries, 'index.json'), `${path}: index.json`);
  const docker = parseJson<DockerManifest>(tarMember(path, entries, 'manifest.json'), `${path}: manifest.json`);
  return { path, kind: 'tar', names: withPath(path, () => archiveNames(index, docker)) };
}

function withPath<T>(path: string, f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof ImageImportError) throw new ImageImportError(err.reason, `${path}: ${err.message}`);
    throw err;
  }
}

/** The running kubelet kind's ctr and containerd socket, or why there is none. */
export function kubeletContainerd(root: string): { ctr: string; socket: string; containerdRoot: string } {
  const s = readState(root);
  if (!s)
    throw new ImageImportError('NoEnvironment', `no local environment in ${root} (run: krt local up --node=kubelet)`);
  if (s.nodeKind !== 'kubelet' || !s.kubelet)
    throw new ImageImportError(
      'NotKubeletKind',
      'the node agent runs images/<name>/image.json on the host and has no image store; ' +
        'image import needs an environment of the kubelet kind (krt local down --purge; krt local up --node=kubelet)',
    );
  if (!isAlive(s.pids.containerd))
    throw new ImageImportError('NotRunning', `containerd of the environment in ${root} is not running (krt local up)`);
  const k = kubeletLayout(root);
  return { ctr: join(s.kubelet.binDir, 'ctr'), socket: k.containerdSocket, containerdRoot: k.containerdRoot };
}

/**
 * The blobs of an OCI layout directory that the environment's content store already holds (the
 * kind's cached layers, say): left out of the stream, as `up` leaves out the seeded layers.
 */
export function blobsToSkip(layoutDir: string, containerdRoot: string): string[] {
  const dir = join(layoutDir, 'blobs', 'sha256');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((hex) => existsSync(contentBlobPath(containerdRoot, `sha256:${hex}`)));
}

function importOne(ctr: string, socket: string, containerdRoot: string, a: ArchiveInfo): void {
  const excludes =
    a.kind === 'layout' ? blobsToSkip(a.path, containerdRoot).map((h) => `--exclude=./blobs/sha256/${h}`) : [];
  const script =
    a.kind === 'layout'
      ? 'd=$1 c=$2 s=$3; shift 3; tar -C "$d" -cf - "$@" . | "$c" --address "$s" -n k8s.io images import -'
      : '"$2" --address "$3" -n k8s.io images import "$1"';
  const r = spawnSync('sh', ['-c', script, 'sh', a.path, ctr, socket, ...excludes], {
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new ImageImportError('ImportFailed', `${a.path}: ctr images import failed: ${r.stderr}`);
}

/** The image names in containerd's k8s.io namespace. */
export function listImages(ctr: string, socket: string): string[] {
  const out = execFileSync(ctr, ['--address', socket, '-n', 'k8s.io', 'images', 'ls', '-q'], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean);
}

/**
 * Imports the archives into the environment's containerd and returns the image names, each
 * checked to be in containerd afterwards. All archives are inspected before any is imported.
 */
export function importImageArchives(root: string, paths: string[]): string[] {
  if (paths.length === 0) throw new ImageImportError('BadArchive', 'no archive given');
  const { ctr, socket, containerdRoot } = kubeletContainerd(root);
  const archives = paths.map(inspectArchive);
  for (const a of archives) importOne(ctr, socket, containerdRoot, a);
  const have = new Set(listImages(ctr, socket));
  const names = archives.flatMap((a) => a.names);
  const missing = names.filter((n) => !have.has(n));
  if (missing.length > 0)
    throw new ImageImportError('ImportFailed', `containerd does not list ${missing.join(', ')} after the import`);
  return names;
}
