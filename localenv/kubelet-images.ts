/**
 * The kubelet node kind's images, assembled without Docker or a registry and imported into
 * containerd's k8s.io namespace: the project's images (images/<name>/Dockerfile, read by
 * image-spec.ts) as an OCI layout of four layers — a Debian bookworm rootfs with the
 * Dockerfile's apt packages (mmdebstrap, cached per package set), the project's Node 22 at
 * /usr/local/bin/node, the production node_modules (cached per package-lock.json) and the
 * application at /app (this checkout's files) — plus the sandbox image (upstream's pause.c,
 * compiled statically). Every layer but the application's is cached with its digest; the
 * containerd image seed (kubelet-image-seed.ts) holds them unpacked. See docs/kubelet-node.md.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  createReadStream,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { BASE_ENV, ociImageConfig, parseDockerfile, type ImageSpec } from './image-spec.ts';
import { PAUSE_IMAGE } from './kubelet-config.ts';
import { productionPackages, type PackageLock } from './npm-production.ts';
import { REPO_ROOT } from './paths.ts';

export const PROJECT_REGISTRY = 'ghcr.io/kruntimes/';
/** Every tag the project's manifests, examples and tests name; all point at the local build. */
export const LOCAL_TAGS = ['dev', '0.1.0', 'v0.0.3', 'v1'];
const SUITE = 'bookworm';
const TAR_FLAGS = ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '--xattrs'];
const MT = {
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar',
};

interface Blob {
  digest: string;
  size: number;
  path: string;
}

const cacheRoot = (): string => process.env.KRUNTIMES_CACHE ?? join(homedir(), '.cache', 'kruntimes');
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

function fileDigest(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path)
      .on('data', (d) => h.update(d))
      .on('end', () => resolve(`sha256:${h.digest('hex')}`))
      .on('error', reject);
  });
}

async function blobOf(path: string): Promise<Blob> {
  return { digest: await fileDigest(path), size: statSync(path).size, path };
}

/**
 * A cached layer's blob: its digest is kept beside it (`<tar>.sha256`, with the size and mtime it
 * was computed for), so an unchanged layer is never read again.
 */
export async function cachedBlobOf(path: string): Promise<Blob> {
  const st = statSync(path);
  const stamp = `${st.size} ${Math.trunc(st.mtimeMs)}`;
  const side = `${path}.sha256`;
  const [digest, ...rest] = existsSync(side) ? readFileSync(side, 'utf8').trim().split(' ') : [];
  if (digest?.startsWith('sha256:') && rest.join(' ') === stamp) return { digest, size: st.size, path };
  const b = await blobOf(path);
  writeFileSync(side, `${b.digest} ${stamp}\n`);
  return b;
}

function tarDir(dir: string, out: string): void {
  execFileSync('tar', [...TAR_FLAGS, '-C', dir, '-cf', `${out}.tmp`, '.'], { stdio: 'inherit' });
  renameSync(`${out}.tmp`, out);
}

/** Debian bookworm minbase with the packages and node:22-bookworm-slim's `node` user (1000:1000). */
function rootfsLayer(packages: string[], progress: (m: string) => void): string {
  const pkgs = [...new Set(packages)].sort();
  const key = `rootfs-${SUITE}-${sha(pkgs.join(',')).slice(0, 16)}`;
  const out = join(cacheRoot(), `${key}.tar`);
  if (existsSync(out) && statSync(out).isFile()) return out;
  const dir = join(cacheRoot(), `${key}.dir`);
  if (!existsSync(join(dir, 'etc', 'debian_version'))) {
    progress(`assembling a Debian ${SUITE} rootfs with ${pkgs.join(' ') || 'no extra packages'} (mmdebstrap, once)`);
    rmSync(dir, { recursive: true, force: true });
    const r = spawnSync('nice', mmdebstrapArgs(pkgs, dir), { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0)
      throw new Error(`mmdebstrap failed (exit ${r.status}); is it installed (scripts/setup.sh --kubelet)?`);
  }
  tarDir(dir, out);
  rmSync(dir, { recursive: true, force: true });
  return out;
}

function mmdebstrapArgs(pkgs: string[], dir: string): string[] {
  const user = 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node';
  return [
    '-n',
    '10',
    'mmdebstrap',
    '--quiet',
    '--mode=root',
    '--format=directory',
    '--variant=minbase',
    '--aptopt=APT::Install-Recommends "false"',
    ...(pkgs.length ? [`--include=${pkgs.join(',')}`] : []),
    `--customize-hook=chroot "$1" sh -c '${user}'`,
    '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
    SUITE,
    dir,
  ];
}

/** The project's Node 22 at /usr/local/bin/node, where node:22-bookworm-slim has it. */
function nodeLayer(nodeBin: string): string {
  const version = execFileSync(nodeBin, ['--version'], { encoding: 'utf8' }).trim();
  const out = join(cacheRoot(), `node-layer-${version}.tar`);
  if (existsSync(out)) return out;
  const stage = join(cacheRoot(), `node-layer-${version}.stage`);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(join(stage, 'usr/local/bin'), { recursive: true });
  copyFileSync(nodeBin, join(stage, 'usr/local/bin/node'));
  tarDir(stage, out);
  rmSync(stage, { recursive: true, force: true });
  return out;
}

/**
 * What the Dockerfiles' `npm ci --omit=dev` and `npm install --no-save tsx@4` put in
 * <workdir>/node_modules: the checkout's production packages (npm-production.ts), cached per
 * package-lock.json and Node version.
 */
function nodeModulesLayer(workdir: string, nodeVersion: string): string {
  const lockText = readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8');
  const key = sha(`node-modules-v1\n${workdir}\n${nodeVersion}\n${lockText}`).slice(0, 16);
  const out = join(cacheRoot(), `node-modules-${key}.tar`);
  if (existsSync(out)) return out;
  const src = realpathSync(join(REPO_ROOT, 'node_modules'));
  const keys = productionPackages(JSON.parse(lockText) as PackageLock, ['tsx']);
  const stage = join(cacheRoot(), `node-modules-${key}.stage`);
  rmSync(stage, { recursive: true, force: true });
  const dst = join(stage, workdir.replace(/^\//, ''), 'node_modules');
  mkdirSync(dst, { recursive: true });
  const rel = keys.map((k) => k.slice('node_modules/'.length)).filter((k) => existsSync(join(src, k)));
  copyTree(src, rel, dst);
  copyBinLinks(src, dst, rel);
  tarDir(stage, out);
  rmSync(stage, { recursive: true, force: true });
  // The layers of earlier locks are not used again (the seed holds the one in use).
  for (const f of readdirSync(cacheRoot()))
    if (/^node-modules-[0-9a-f]{16}\.tar(\.sha256)?$/.test(f) && !f.startsWith(`node-modules-${key}.`))
      rmSync(join(cacheRoot(), f), { force: true });
  return out;
}

/** Copies the relative paths (directories recursively) from src into dst, keeping modes and links. */
function copyTree(src: string, rel: string[], dst: string): void {
  const r = spawnSync('sh', ['-c', 'tar -C "$1" --null -T - -cf - | tar -C "$2" -xf -', 'sh', src, dst], {
    input: rel.join('\0'),
    stdio: ['pipe', 'inherit', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`copying ${src} into the image failed (exit ${r.status})`);
}

/** node_modules/.bin links whose target is one of the copied packages, as npm ci makes them. */
function copyBinLinks(src: string, dst: string, rel: string[]): void {
  const bin = join(src, '.bin');
  if (!existsSync(bin)) return;
  const links = readdirSync(bin).filter((f) => {
    let target: string;
    try {
      target = readlinkSync(join(bin, f)).replace(/^\.\.\//, '');
    } catch {
      return false;
    }
    return rel.some((p) => target.startsWith(`${p}/`));
  });
  if (links.length > 0)
    copyTree(
      src,
      links.map((f) => `.bin/${f}`),
      dst,
    );
}

/** The files `COPY . .` puts under /app (the checkout, without node_modules), and the entrypoint. */
function appLayer(spec: ImageSpec, work: string): string {
  const stage = join(work, 'app-stage');
  rmSync(stage, { recursive: true, force: true });
  const app = join(stage, spec.workdir.replace(/^\//, ''));
  mkdirSync(app, { recursive: true });
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  })
    .split('\0')
    .filter((f) => f && f !== 'node_modules' && existsSync(join(REPO_ROOT, f)));
  spawnSync('sh', ['-c', `tar -C "$1" --null -T "$2" -cf - | tar -C "$3" -xf -`, 'sh', REPO_ROOT, '-', app], {
    input: files.join('\0'),
    stdio: ['pipe', 'inherit', 'inherit'],
  });
  for (const c of spec.copies.filter(
    (x) => x.src !== '.' && x.src !== 'package.json' && x.src !== 'package-lock.json',
  )) {
    const dst = join(stage, c.dst.replace(/^\//, ''));
    mkdirSync(join(dst, '..'), { recursive: true });
    if (c.src === 'ui/dist') {
      // The dashboard's UI (scripts/build-ui.ts); a local cluster runs no dashboard Pod, so an
      // unbuilt UI is left out rather than failing the image.
      if (existsSync(join(REPO_ROOT, 'ui', 'dist', 'app.js')))
        execFileSync('cp', ['-a', join(REPO_ROOT, 'ui', 'dist'), join(app, 'ui', 'dist')]);
      continue;
    }
    if (c.src === 'dist') {
      // The bundle stage's output: the checkout's bundle, built by `up` (localenv/bundle.ts).
      if (!existsSync(join(REPO_ROOT, 'dist', 'kruntimes.mjs'))) throw new Error('dist/ is missing: npm run bundle');
      execFileSync('cp', ['-a', join(REPO_ROOT, 'dist'), join(app, 'dist')]);
      continue;
    }
    copyFileSync(join(REPO_ROOT, c.src), dst);
    execFileSync('chmod', ['--reference', join(REPO_ROOT, c.src), dst]);
  }
  const out = join(work, 'app-layer.tar');
  tarDir(stage, out);
  rmSync(stage, { recursive: true, force: true });
  return out;
}

/** Upstream's pause.c (from the pinned k8s.io/kubernetes module), static, as uid 65535. */
function pauseLayer(): string {
  const out = join(cacheRoot(), 'pause-layer.tar');
  if (existsSync(out)) return out;
  const modDir = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();
  const k8s = readdirSync(join(modDir, 'k8s.io')).filter((d) => d.startsWith('kubernetes@'));
  const src = k8s.map((d) => join(modDir, 'k8s.io', d, 'build/pause/linux/pause.c')).find((p) => existsSync(p));
  if (!src) throw new Error('pause.c not found: run scripts/build-kubelet.sh first (it downloads k8s.io/kubernetes)');
  const stage = join(cacheRoot(), 'pause-layer.stage');
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  execFileSync('gcc', ['-Os', '-static', '-DVERSION=3.10.1', '-o', join(stage, 'pause'), src]);
  tarDir(stage, out);
  rmSync(stage, { recursive: true, force: true });
  return out;
}

/**
 * The node agent's toolchain images (nodeagent/images.ts HOST_IMAGES: bash, busybox, python,
 * debian, run there on the host's binaries) as root images on the Debian rootfs, under the tags
 * the project's specs and examples name. Like the node agent's, they are stand-ins: python is
 * bookworm's python3 and busybox is the rootfs's sh and coreutils (docs/kubelet-node.md).
 */
export const TOOLCHAIN_IMAGES: { repository: string; tags: string[]; packages: string[]; cmd: string[] }[] = [
  { repository: 'docker.io/library/bash', tags: ['5', 'latest'], packages: [], cmd: ['bash'] },
  { repository: 'docker.io/library/busybox', tags: ['1.36', 'latest'], packages: [], cmd: ['sh'] },
  // The python-runtime image's package set, so the rootfs is shared (and cached) with it.
  {
    repository: 'docker.io/library/python',
    tags: ['3.11', '3.12', 'latest'],
    packages: ['ca-certificates', 'python3'],
    cmd: ['python3'],
  },
  {
    repository: 'docker.io/library/debian',
    tags: ['bookworm', 'bookworm-slim', '12', 'latest'],
    packages: [],
    cmd: ['bash'],
  },
];

/** A toolchain image's config: no USER (root, as upstream's), the base PATH, its cmd. */
export function toolchainConfig(cmd: string[], diffIds: string[]): Record<string, unknown> {
  return {
    architecture: 'amd64',
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: { Env: Object.entries(BASE_ENV).map(([k, v]) => `${k}=${v}`), Cmd: cmd },
    rootfs: { type: 'layers', diff_ids: diffIds },
  };
}

/** An image: its names, its layer tarballs (the first `baseLayers` are cached) and its config. */
export interface LocalImage {
  name: string;
  refs: string[];
  layers: string[];
  baseLayers: number;
  config: (diffIds: string[]) => Record<string, unknown>;
}

/**
 * Every image: the project's (from its Dockerfile), the toolchain images and the sandbox image.
 * With `withApp: false` the project images stop before their application layer (the seed).
 */
export function localImages(nodeBin: string, progress: (m: string) => void, work?: string): LocalImage[] {
  const nodeVersion = execFileSync(nodeBin, ['--version'], { encoding: 'utf8' }).trim();
  const out: LocalImage[] = [];
  const apps = new Map<string, string>();
  for (const name of readdirSync(join(REPO_ROOT, 'images')).sort()) {
    const dockerfile = join(REPO_ROOT, 'images', name, 'Dockerfile');
    if (!existsSync(dockerfile)) continue;
    const spec = parseDockerfile(readFileSync(dockerfile, 'utf8'));
    const appKey = JSON.stringify([spec.workdir, spec.copies]);
    if (work && !apps.has(appKey)) apps.set(appKey, appLayer(spec, join(work, `app-${apps.size}`)));
    const base = [rootfsLayer(spec.aptPackages, progress), nodeLayer(nodeBin)];
    if (spec.npmInstall) base.push(nodeModulesLayer(spec.workdir, nodeVersion));
    out.push({
      name,
      refs: LOCAL_TAGS.map((t) => `${PROJECT_REGISTRY}${name}:${t}`),
      layers: work ? [...base, apps.get(appKey)!] : base,
      baseLayers: base.length,
      config: (diffIds) => ociImageConfig(spec, diffIds, nodeVersion),
    });
  }
  for (const t of TOOLCHAIN_IMAGES) {
    const layers = [rootfsLayer(t.packages, progress)];
    const config = (diffIds: string[]): Record<string, unknown> => toolchainConfig(t.cmd, diffIds);
    out.push({
      name: t.repository,
      refs: t.tags.map((tag) => `${t.repository}:${tag}`),
      layers,
      baseLayers: 1,
      config,
    });
  }
  out.push({ name: 'pause', refs: [PAUSE_IMAGE], layers: [pauseLayer()], baseLayers: 1, config: pauseConfig });
  return out;
}

function pauseConfig(diffIds: string[]): Record<string, unknown> {
  return {
    architecture: 'amd64',
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: { User: '65535:65535', Entrypoint: ['/pause'] },
    rootfs: { type: 'layers', diff_ids: diffIds },
  };
}

/** The name of an image's cached part in the seed (`localImages` without `work`). */
export const SEED_REGISTRY = 'kruntimes.local/seed/';

/** The images of the containerd seed: every cached layer, named so the chains are unpacked. */
export function seedImages(nodeBin: string, progress: (m: string) => void): LocalImage[] {
  return localImages(nodeBin, progress).map((img) =>
    !img.refs[0]?.startsWith(PROJECT_REGISTRY)
      ? img
      : {
          ...img,
          refs: [`${SEED_REGISTRY}${img.name}:base`],
          config: (diffIds) => ({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: diffIds } }),
        },
  );
}

function putBlob(layout: string, b: Blob): void {
  const p = join(layout, 'blobs', 'sha256', b.digest.slice('sha256:'.length));
  if (existsSync(p)) return;
  try {
    linkSync(b.path, p);
  } catch {
    copyFileSync(b.path, p);
  }
}

function putJson(layout: string, work: string, obj: unknown): Blob {
  const text = JSON.stringify(obj);
  const digest = `sha256:${sha(text)}`;
  const path = join(work, digest.slice('sha256:'.length));
  writeFileSync(path, text);
  const b = { digest, size: Buffer.byteLength(text), path };
  putBlob(layout, b);
  return b;
}

async function layerBlobs(img: LocalImage): Promise<Blob[]> {
  return Promise.all(img.layers.map((l, i) => (i < img.baseLayers ? cachedBlobOf(l) : blobOf(l))));
}

/**
 * One OCI image layout holding the images, each tag an index entry named for containerd. A
 * layer blob for which `have(digest)` holds (already in the target content store) is left out.
 * Returns the layout's directory and its index entries.
 */
export async function buildImageLayout(
  images: LocalImage[],
  work: string,
  have: (digest: string) => boolean = () => false,
): Promise<{ layout: string; manifests: Record<string, unknown>[] }> {
  const layout = join(work, 'layout');
  rmSync(layout, { recursive: true, force: true });
  mkdirSync(join(layout, 'blobs', 'sha256'), { recursive: true });
  const manifests: Record<string, unknown>[] = [];
  for (const img of images) {
    const layers = await layerBlobs(img);
    for (const l of layers) if (!have(l.digest)) putBlob(layout, l);
    const config = putJson(layout, work, img.config(layers.map((l) => l.digest)));
    const manifest = putJson(layout, work, {
      schemaVersion: 2,
      mediaType: MT.manifest,
      config: { mediaType: MT.config, digest: config.digest, size: config.size },
      layers: layers.map((l) => ({ mediaType: MT.layer, digest: l.digest, size: l.size })),
    });
    for (const ref of img.refs)
      manifests.push({
        mediaType: MT.manifest,
        digest: manifest.digest,
        size: manifest.size,
        platform: { architecture: 'amd64', os: 'linux' },
        annotations: { 'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': ref.split(':').pop() },
      });
  }
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests }));
  return { layout, manifests };
}

/** Imports an OCI layout into containerd's k8s.io namespace (unpacked for overlayfs). */
export function importLayout(ctr: string, socket: string, layout: string): void {
  const r = spawnSync(
    'sh',
    ['-c', 'tar -C "$1" -cf - . | "$2" --address "$3" -n k8s.io images import -', 'sh', layout, ctr, socket],
    { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`ctr images import failed: ${r.stderr}`);
}

/** containerd's content store blob of a digest under its root (the seed or an environment's). */
export function contentBlobPath(containerdRoot: string, digest: string): string {
  return join(containerdRoot, 'io.containerd.content.v1.content', 'blobs', 'sha256', digest.replace(/^sha256:/, ''));
}

/**
 * Builds the images and imports them into the environment's containerd; layers already in its
 * content store (from the seed) are neither copied nor sent again, so this is the application
 * layer (a few MB) on a seeded root.
 */
export async function importImages(
  ctr: string,
  socket: string,
  containerdRoot: string,
  progress: (m: string) => void,
): Promise<void> {
  const work = join(cacheRoot(), `images-work.tmp-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  try {
    const images = localImages(process.execPath, progress, work);
    const { layout } = await buildImageLayout(images, work, (d) => existsSync(contentBlobPath(containerdRoot, d)));
    progress('importing the local images into containerd');
    importLayout(ctr, socket, layout);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export { cacheRoot as imageCacheRoot };
