/**
 * Which images the node agent can run, and how. The project's own images
 * (ghcr.io/kruntimes/<name>) map to images/<name>/ in the checkout: image.json holds the
 * image's entrypoint, cmd, env and USER exactly as its Dockerfile declares them, and bin/ holds
 * the entrypoint executables, put first on PATH. A small set of well-known toolchain images
 * run on the host's own binaries. Anything else is refused with a clear reason.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const PROJECT_REGISTRY = 'ghcr.io/kruntimes/';

export interface ImageConfig {
  entrypoint: string[];
  cmd: string[];
  env: Record<string, string>;
  /** Directories put first on PATH. */
  path: string[];
  /** The image's USER (uid[:gid] or a name); absent: the image runs as root. */
  user?: string;
}

const HOST_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** Toolchain images that are run with the host's binaries (same behaviour for short scripts). */
export const HOST_IMAGES: Record<string, ImageConfig> = {
  'docker.io/library/bash': { entrypoint: [], cmd: ['bash'], env: {}, path: [] },
  'docker.io/library/busybox': { entrypoint: [], cmd: ['sh'], env: {}, path: [] },
  'docker.io/library/python': { entrypoint: [], cmd: ['python3'], env: {}, path: [] },
  'docker.io/library/debian': { entrypoint: [], cmd: ['bash'], env: {}, path: [] },
};

/** docker.io/library/bash from "bash:5", "library/bash", "docker.io/library/bash@sha256:..." */
export function imageRepository(image: string): string {
  let ref = image.split('@')[0] ?? image;
  const lastSlash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon > lastSlash) ref = ref.slice(0, colon);
  const parts = ref.split('/');
  const hasRegistry = parts.length > 1 && /[.:]|^localhost$/.test(parts[0] ?? '');
  if (!hasRegistry) return parts.length === 1 ? `docker.io/library/${ref}` : `docker.io/${ref}`;
  return ref;
}

export type ImageResolution = { ok: true; config: ImageConfig } | { ok: false; reason: string; message: string };

export function resolveImage(image: string, repoRoot: string): ImageResolution {
  const repo = imageRepository(image);
  if (repo.startsWith(PROJECT_REGISTRY)) {
    const name = repo.slice(PROJECT_REGISTRY.length);
    const dir = join(repoRoot, 'images', name);
    const manifest = join(dir, 'image.json');
    if (!/^[a-z0-9-]+$/.test(name) || !existsSync(manifest)) {
      return {
        ok: false,
        reason: 'ImageNotRunnable',
        message: `image ${image}: no local entrypoint for project image "${name}" (expected ${manifest})`,
      };
    }
    const m = JSON.parse(readFileSync(manifest, 'utf8')) as Partial<ImageConfig>;
    return {
      ok: true,
      config: {
        entrypoint: m.entrypoint ?? [],
        cmd: m.cmd ?? [],
        env: m.env ?? {},
        path: [join(dir, 'bin'), ...HOST_PATH],
        ...(m.user ? { user: m.user } : {}),
      },
    };
  }
  const host = HOST_IMAGES[repo];
  if (host) return { ok: true, config: { ...host, path: HOST_PATH } };
  return {
    ok: false,
    reason: 'ImageNotRunnable',
    message:
      `image ${image} cannot be run by the kruntimes node agent (it runs host processes, no container runtime); ` +
      `runnable images: ${PROJECT_REGISTRY}<component> and ${Object.keys(HOST_IMAGES).join(', ')}`,
  };
}

/** Kubernetes semantics: command replaces ENTRYPOINT, args replace CMD. */
export function effectiveArgv(cfg: ImageConfig, command?: string[], args?: string[]): string[] {
  if (command && command.length > 0) return [...command, ...(args ?? [])];
  return [...cfg.entrypoint, ...(args && args.length > 0 ? args : cfg.cmd)];
}
