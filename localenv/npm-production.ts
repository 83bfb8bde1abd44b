/**
 * Which of the checkout's node_modules an image's `npm ci --omit=dev` (plus the Dockerfiles'
 * `npm install --no-save tsx@4`) would install, read from package-lock.json (lockfile v2/v3):
 * every package not marked `dev`, plus the dependency closure of the extra packages. The
 * kubelet node kind's images carry these instead of the whole checkout's node_modules.
 */

export interface LockPackage {
  dev?: boolean;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

export interface PackageLock {
  lockfileVersion?: number;
  packages?: Record<string, LockPackage>;
}

export class PackageLockError extends Error {
  readonly reason = 'UnsupportedPackageLock';
}

const NM = 'node_modules/';

/** The lock key a `require(name)` from the package at `from` resolves to (Node's lookup), if any. */
export function resolveLockPackage(
  packages: Record<string, LockPackage>,
  from: string,
  name: string,
): string | undefined {
  let base = from;
  for (;;) {
    const candidate = base ? `${base}/${NM}${name}` : `${NM}${name}`;
    if (packages[candidate]) return candidate;
    if (!base) return undefined;
    const i = base.lastIndexOf(`/${NM}`);
    base = i < 0 ? '' : base.slice(0, i);
  }
}

function closure(packages: Record<string, LockPackage>, roots: string[]): Set<string> {
  const seen = new Set<string>();
  const queue = roots.map((name) => resolveLockPackage(packages, '', name)).filter((k): k is string => !!k);
  while (queue.length > 0) {
    const key = queue.pop()!;
    if (seen.has(key)) continue;
    seen.add(key);
    const p = packages[key]!;
    for (const dep of Object.keys({ ...p.dependencies, ...p.optionalDependencies })) {
      const k = resolveLockPackage(packages, key, dep);
      if (k && !seen.has(k)) queue.push(k);
    }
  }
  return seen;
}

/**
 * The lock keys (`node_modules/a`, `node_modules/@s/b`, `node_modules/a/node_modules/c`) an
 * image installs, sorted, without those inside another selected package (copied with it).
 */
export function productionPackages(lock: PackageLock, extra: string[] = []): string[] {
  if (!lock.packages || (lock.lockfileVersion ?? 0) < 2)
    throw new PackageLockError('package-lock.json: lockfileVersion 2 or 3 (a "packages" map) is required');
  const packages = lock.packages;
  for (const name of extra)
    if (!resolveLockPackage(packages, '', name))
      throw new PackageLockError(`package-lock.json: ${name} is not installed`);
  const selected = new Set(Object.keys(packages).filter((k) => k.startsWith(NM) && !packages[k]!.dev));
  for (const k of closure(packages, extra)) selected.add(k);
  for (const k of selected)
    if (packages[k]!.link) throw new PackageLockError(`package-lock.json: linked package ${k} is not supported`);
  const inside = (k: string): boolean => {
    for (let i = k.indexOf(`/${NM}`); i >= 0; i = k.indexOf(`/${NM}`, i + 1))
      if (selected.has(k.slice(0, i))) return true;
    return false;
  };
  return [...selected].filter((k) => !inside(k)).sort();
}
