/**
 * The project's images have one definition, images/<name>/Dockerfile, and two builders: a
 * container build for production and the kubelet node kind's local assembly (no Docker, no
 * registry). This module reads the subset of Dockerfile syntax the project's images use and
 * turns it into what the local assembly needs: the Debian packages, the OCI image config and
 * the files copied. Anything else in a Dockerfile is refused, so the two builders cannot drift
 * silently. images/<name>/image.json (the node agent's view) is checked against it in tests.
 */

/** The one base image the project's Dockerfiles use: Debian bookworm plus Node 22. */
export const BASE_IMAGE = 'node:22-bookworm-slim';

export interface ImageSpec {
  base: string;
  /** `apt-get install` packages of RUN lines. */
  aptPackages: string[];
  workdir: string;
  env: Record<string, string>;
  user?: string;
  entrypoint: string[];
  cmd: string[];
  /** COPY <src> <dst> pairs, in order (`.` is the build context: the repository). */
  copies: { src: string; dst: string }[];
  /** RUN lines that install the npm dependencies (`npm ci ...`). */
  npmInstall: boolean;
  /** Build stages (`FROM ... AS <name>`) that run `npm run bundle`: their dist/ is the repository's. */
  bundleStages: string[];
}

/** Parser state: the build stage being read (undefined: the final stage). */
interface ParseState {
  stage?: string;
}

export class DockerfileError extends Error {
  readonly reason = 'UnsupportedDockerfile';
}

/** Joins continuation lines and drops comments. */
export function dockerfileInstructions(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!cur && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      cur += `${line.slice(0, -1)} `;
      continue;
    }
    out.push((cur + line).trim());
    cur = '';
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

function jsonArray(arg: string, where: string): string[] {
  let v: unknown;
  try {
    v = JSON.parse(arg);
  } catch {
    v = undefined;
  }
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw new DockerfileError(`${where}: only the JSON (exec) form is supported`);
  return v;
}

/** The packages of `apt-get install [-y] [--no-install-recommends] a b c` inside a RUN line. */
export function aptPackagesOf(run: string): string[] {
  const pkgs: string[] = [];
  for (const part of run.split('&&')) {
    const m = /apt-get install\s+(.*)$/.exec(part.trim());
    if (!m?.[1]) continue;
    pkgs.push(...m[1].split(/\s+/).filter((w) => w && !w.startsWith('-')));
  }
  return pkgs;
}

function applyRun(spec: ImageSpec, arg: string): void {
  if (/\bnpm ci\b/.test(arg)) {
    spec.npmInstall = true;
    return;
  }
  if (/apt-get install/.test(arg)) {
    spec.aptPackages.push(...aptPackagesOf(arg));
    return;
  }
  throw new DockerfileError(`RUN ${arg}: the local image assembly knows apt-get install and npm ci only`);
}

/** The build stage commands the local assembly reproduces in the checkout. */
const BUILD_COMMANDS = new Set([
  'npm run bundle',
  // The dashboard's UI bundle (ui/dist), built in the checkout by scripts/setup.sh and the dashboard e2e.
  'npm run bundle && npx tsx scripts/build-ui.ts',
]);

/**
 * A build stage may only produce the JavaScript bundles (`npm ci`, `COPY`, `WORKDIR`, `npm run
 * bundle`, the dashboard UI build): the local assembly builds the same bundles in the checkout
 * (localenv/bundle.ts, scripts/build-ui.ts).
 */
function applyBuildStage(spec: ImageSpec, stage: string, op: string, arg: string): void {
  if (op === 'WORKDIR' || op === 'COPY' || (op === 'RUN' && /^npm ci\b/.test(arg))) return;
  if (op === 'RUN' && BUILD_COMMANDS.has(arg)) {
    spec.bundleStages.push(stage);
    return;
  }
  throw new DockerfileError(`${op} ${arg}: build stage "${stage}" may only run npm ci and npm run bundle`);
}

function applyFrom(spec: ImageSpec, state: ParseState, arg: string): void {
  const m = /^(\S+)(?:\s+AS\s+([a-z0-9-]+))?$/i.exec(arg);
  if (m?.[1] !== BASE_IMAGE) throw new DockerfileError(`FROM ${arg}: the local assembly builds ${BASE_IMAGE} only`);
  state.stage = m[2];
  if (!m[2]) spec.base = m[1];
}

/** `COPY --from=<bundle stage> <dir>/dist <dst>` (or `<dir>/ui/dist`): the checkout's dist/ or ui/dist/. */
function applyCopyFrom(spec: ImageSpec, arg: string): void {
  const m = /^--from=([a-z0-9-]+)\s+(\S+)\s+(\S+)$/i.exec(arg);
  if (!m || !spec.bundleStages.includes(m[1]!) || !m[2]!.endsWith('/dist'))
    throw new DockerfileError(`COPY ${arg}: only COPY --from=<bundle stage> <dir>/dist <dst> is supported`);
  spec.copies.push({ src: m[2]!.endsWith('/ui/dist') ? 'ui/dist' : 'dist', dst: m[3]! });
}

function applyInstruction(spec: ImageSpec, state: ParseState, op: string, arg: string): void {
  if (op === 'FROM') return applyFrom(spec, state, arg);
  if (state.stage) return applyBuildStage(spec, state.stage, op, arg);
  if (op === 'COPY' && arg.startsWith('--from=')) return applyCopyFrom(spec, arg);
  switch (op) {
    case 'RUN':
      return applyRun(spec, arg);
    case 'WORKDIR':
      spec.workdir = arg;
      return;
    case 'ENV': {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(arg);
      if (!m) throw new DockerfileError(`ENV ${arg}: only KEY=value is supported`);
      spec.env[m[1]!] = m[2]!.replace(/^"(.*)"$/, '$1');
      return;
    }
    case 'USER':
      spec.user = arg;
      return;
    case 'ENTRYPOINT':
      spec.entrypoint = jsonArray(arg, 'ENTRYPOINT');
      spec.cmd = [];
      return;
    case 'CMD':
      spec.cmd = jsonArray(arg, 'CMD');
      return;
    case 'COPY': {
      const words = arg.split(/\s+/);
      if (words.length !== 2 && !(words.length > 2 && words.at(-1)!.endsWith('/')))
        throw new DockerfileError(`COPY ${arg}: use COPY <src> <dst> or COPY <srcs...> <dir>/`);
      const dst = words.at(-1)!;
      for (const src of words.slice(0, -1)) spec.copies.push({ src, dst });
      return;
    }
    default:
      throw new DockerfileError(`${op}: not supported by the local image assembly`);
  }
}

export function parseDockerfile(text: string): ImageSpec {
  const spec: ImageSpec = {
    base: '',
    aptPackages: [],
    workdir: '/',
    env: {},
    entrypoint: [],
    cmd: [],
    copies: [],
    npmInstall: false,
    bundleStages: [],
  };
  const state: ParseState = {};
  for (const ins of dockerfileInstructions(text)) {
    const m = /^([A-Za-z]+)\s+(.*)$/.exec(ins);
    if (!m) throw new DockerfileError(`cannot read instruction: ${ins}`);
    applyInstruction(spec, state, m[1]!.toUpperCase(), m[2]!.trim());
  }
  if (!spec.base) throw new DockerfileError('no FROM');
  return spec;
}

/** What node:22-bookworm-slim itself sets (its Dockerfile): PATH, NODE_VERSION and the node user. */
export const BASE_ENV: Record<string, string> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
};

/** The OCI image config (application/vnd.oci.image.config.v1+json) for a spec and its layers. */
export function ociImageConfig(spec: ImageSpec, diffIds: string[], nodeVersion: string): Record<string, unknown> {
  const env = { ...BASE_ENV, NODE_VERSION: nodeVersion.replace(/^v/, ''), ...spec.env };
  return {
    architecture: 'amd64',
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: {
      ...(spec.user ? { User: spec.user } : {}),
      Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      Entrypoint: spec.entrypoint,
      ...(spec.cmd.length ? { Cmd: spec.cmd } : {}),
      WorkingDir: spec.workdir,
    },
    rootfs: { type: 'layers', diff_ids: diffIds },
    history: diffIds.map(() => ({ created: '1970-01-01T00:00:00Z', created_by: 'kruntimes local image assembly' })),
  };
}

/** What the node agent reads (images/<name>/image.json), derived from the same Dockerfile. */
export function nodeAgentView(spec: ImageSpec): {
  entrypoint: string[];
  cmd: string[];
  env: Record<string, string>;
  user?: string;
} {
  return { entrypoint: spec.entrypoint, cmd: spec.cmd, env: spec.env, ...(spec.user ? { user: spec.user } : {}) };
}
