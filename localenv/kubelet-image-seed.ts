/**
 * The kubelet node kind's containerd image seed. Importing about 1 GB of image layers into a
 * fresh containerd (content store, then unpacked overlayfs snapshots) took most of this kind's
 * start. The seed is a containerd root holding every cached layer (rootfs, Node, production
 * node_modules, the toolchain and pause images) imported and unpacked once, under
 * ~/.cache/kruntimes/containerd-seed-<key> where the key is the digest of its images. A new
 * environment's containerd root is a copy of it: hard links for what containerd never changes
 * (content blobs, committed snapshots) and real copies of the rest (its metadata databases).
 * The environment then imports only what the seed lacks: the application layer.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { containerdConfig, kubeletLayout } from './kubelet-config.ts';
import { buildImageLayout, imageCacheRoot, importLayout, seedImages } from './kubelet-images.ts';
import { unmountAll } from './kubelet-node.ts';
import { isAlive, sleep, spawnDetached, stopGroup } from './process.ts';

const SEED_PREFIX = 'containerd-seed-';
/** Subtrees of a containerd root that are never written after they are created. */
export const IMMUTABLE_PARTS = [
  'io.containerd.content.v1.content/blobs',
  'io.containerd.snapshotter.v1.overlayfs/snapshots',
];

/** The seed's key: the digests and names of the images it holds. */
export function seedKey(manifests: Record<string, unknown>[]): string {
  return createHash('sha256').update(JSON.stringify(manifests)).digest('hex').slice(0, 16);
}

/** Regular files of a containerd root outside the immutable subtrees (containerd may write them). */
export function mutableFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (IMMUTABLE_PARTS.includes(relative(root, p))) continue;
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(p);
    }
  };
  walk(root);
  return out;
}

/**
 * Copies the seed into an environment's (absent or empty) containerd root: hard links, then a
 * real copy of every mutable file. Returns false (and changes nothing) if the root has content.
 */
export function copySeed(seed: string, root: string): boolean {
  if (existsSync(root) && readdirSync(root).length > 0) return false;
  rmSync(root, { recursive: true, force: true });
  mkdirSync(dirname(root), { recursive: true });
  try {
    execFileSync('cp', ['-a', '--link', seed, root], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch {
    // Another filesystem than the cache's: a full copy (slower, same result).
    rmSync(root, { recursive: true, force: true });
    execFileSync('cp', ['-a', seed, root]);
  }
  for (const src of mutableFiles(seed)) {
    const dst = join(root, relative(seed, src));
    copyFileSync(src, `${dst}.copy`);
    chmodSync(`${dst}.copy`, statSync(src).mode & 0o7777);
    renameSync(`${dst}.copy`, dst);
  }
  return true;
}

/** Waits until containerd answers; fails at once if it exited. */
async function waitContainerd(pid: number, ctr: string, socket: string, log: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!isAlive(pid)) throw new Error(`the image seed's containerd exited; see ${log}`);
    try {
      execFileSync(ctr, ['--address', socket, 'version'], { stdio: 'ignore' });
      return;
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`the image seed's containerd did not answer in 30 s; see ${log}`, { cause: err });
    }
    await sleep(200);
  }
}

/**
 * Imports the layout into a containerd of its own on a fresh root under tmp, stops it and returns
 * the root. Its socket and state live in a short directory under /tmp (a unix socket path is
 * limited to 108 bytes).
 */
async function importIntoFreshRoot(binDir: string, layout: string, tmp: string): Promise<string> {
  const run = mkdtempSync('/tmp/krt-seed-');
  const k = { ...kubeletLayout(tmp), containerdState: join(run, 'state'), containerdSocket: join(run, 'c.sock') };
  mkdirSync(k.containerdRoot, { recursive: true });
  mkdirSync(k.containerdState, { recursive: true });
  writeFileSync(k.containerdConfig, containerdConfig(k, binDir));
  const ctr = join(binDir, 'ctr');
  const log = join(tmp, 'containerd.log');
  const pid = spawnDetached({
    name: 'containerd (image seed)',
    command: join(binDir, 'containerd'),
    args: ['--config', k.containerdConfig],
    logFile: log,
  });
  try {
    await waitContainerd(pid, ctr, k.containerdSocket, log);
    importLayout(ctr, k.containerdSocket, layout);
  } finally {
    await stopGroup(pid, 20_000);
    unmountAll(tmp);
    unmountAll(run);
    rmSync(run, { recursive: true, force: true });
  }
  return k.containerdRoot;
}

/** Seeds of other keys, and the half-built seeds of processes that are gone, are removed. */
function removeStaleSeeds(cache: string, keep: string): void {
  for (const name of readdirSync(cache)) {
    const p = join(cache, name);
    const ours = /^(containerd-seed-|seed-work|images-work)/.test(name);
    const tmpOf = /\.tmp-(\d+)$/.exec(name);
    const stale = ours && (tmpOf ? !isAlive(Number(tmpOf[1])) : name.startsWith(SEED_PREFIX) && p !== keep);
    // `images-work` is where the assembly kept a full copy of every layer before the seed.
    if (!stale && name !== 'images-work') continue;
    unmountAll(p);
    rmSync(p, { recursive: true, force: true });
  }
}

/** The seed for the current cached layers, built (about as long as one full import) when missing. */
export async function ensureImageSeed(binDir: string, progress: (m: string) => void): Promise<string> {
  const cache = imageCacheRoot();
  const work = join(cache, `seed-work.tmp-${process.pid}`);
  try {
    const { layout, manifests } = await buildImageLayout(seedImages(process.execPath, progress), work);
    const seed = join(cache, `${SEED_PREFIX}${seedKey(manifests)}`);
    if (existsSync(seed)) return seed;
    progress('importing the cached image layers into a new containerd image seed (once per set of layers)');
    const tmp = `${seed}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    const root = await importIntoFreshRoot(binDir, layout, tmp);
    try {
      renameSync(root, seed);
    } catch (err) {
      if (!existsSync(seed)) throw err; // another process built the same seed meanwhile
    }
    rmSync(tmp, { recursive: true, force: true });
    removeStaleSeeds(cache, seed);
    return seed;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
