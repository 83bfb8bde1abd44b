import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  aptPackagesOf,
  BASE_IMAGE,
  DockerfileError,
  nodeAgentView,
  ociImageConfig,
  parseDockerfile,
} from './image-spec.ts';
import { REPO_ROOT } from './paths.ts';

const images = readdirSync(join(REPO_ROOT, 'images')).sort();

describe('image definitions (Dockerfile, local assembly, node agent)', () => {
  it('gives runtimed every program it runs: the kruntimes image installs them (git sources need git)', () => {
    const spec = parseDockerfile(readFileSync(join(REPO_ROOT, 'images', 'kruntimes', 'Dockerfile'), 'utf8'));
    const programs = new Set<string>();
    for (const f of readdirSync(join(REPO_ROOT, 'runtimed')).filter(
      (n) => n.endsWith('.ts') && !n.endsWith('.test.ts'),
    ))
      for (const m of readFileSync(join(REPO_ROOT, 'runtimed', f), 'utf8').matchAll(
        /\b(?:execFile|spawn)(?:Sync)?\(\s*'([\w.-]+)'/g,
      ))
        programs.add(m[1] ?? '');
    assert.ok(programs.has('git'), 'runtimed fetches git sources with git');
    for (const p of programs)
      assert.ok(spec.aptPackages.includes(p), `images/kruntimes installs ${p} (runtimed runs it)`);
    // https repositories: git verifies the server against the system's CA bundle.
    assert.ok(spec.aptPackages.includes('ca-certificates'), 'images/kruntimes installs ca-certificates');
  });

  it('reads every project Dockerfile into the spec the local assembly builds', () => {
    assert.deepEqual(images, ['bash-runtime', 'kruntimes', 'python-runtime']);
    for (const name of images) {
      const spec = parseDockerfile(readFileSync(join(REPO_ROOT, 'images', name, 'Dockerfile'), 'utf8'));
      assert.equal(spec.base, BASE_IMAGE, name);
      assert.equal(spec.workdir, '/app', name);
      assert.ok(spec.npmInstall, name);
      assert.ok(
        spec.copies.some((c) => c.src === '.' && c.dst === '.'),
        name,
      );
      assert.ok(
        spec.copies.some((c) => c.dst === '/usr/local/bin/kruntimes'),
        name,
      );
      assert.ok(
        spec.copies.some((c) => c.src === 'dist' && c.dst === './dist'),
        `${name}: the per-Pod components' bundle from the bundle stage`,
      );
    }
    const kruntimes = parseDockerfile(readFileSync(join(REPO_ROOT, 'images', 'kruntimes', 'Dockerfile'), 'utf8'));
    assert.ok(
      kruntimes.copies.some((c) => c.src === 'ui/dist' && c.dst === './ui/dist'),
      'kruntimes: the dashboard UI (kruntimes dashboard) from the bundle stage',
    );
  });

  it('runs no dependency install script in the project images (aws-lambda-ric builds with cmake, absent there)', () => {
    for (const name of images) {
      const runs = readFileSync(join(REPO_ROOT, 'images', name, 'Dockerfile'), 'utf8')
        .split('\n')
        .filter((l) => /^RUN .*\bnpm (ci|install)\b/.test(l));
      assert.ok(runs.length > 0, name);
      for (const run of runs)
        for (const cmd of run.split('&&').filter((c) => /\bnpm (ci|install)\b/.test(c)))
          assert.match(cmd, /--ignore-scripts/, `${name}: ${cmd.trim()}`);
    }
  });

  it('agrees with images/<name>/image.json, which the node agent runs', () => {
    for (const name of images) {
      const spec = parseDockerfile(readFileSync(join(REPO_ROOT, 'images', name, 'Dockerfile'), 'utf8'));
      const agent = JSON.parse(readFileSync(join(REPO_ROOT, 'images', name, 'image.json'), 'utf8')) as unknown;
      assert.deepEqual(nodeAgentView(spec), agent, `images/${name}: image.json and Dockerfile disagree`);
    }
  });

  it('takes apt packages, ENV, USER, ENTRYPOINT and CMD as a container build would', () => {
    const spec = parseDockerfile(
      [
        `FROM ${BASE_IMAGE}`,
        'RUN apt-get update && apt-get install -y --no-install-recommends \\',
        '    git python3 && rm -rf /var/lib/apt/lists/*',
        'WORKDIR /app',
        'ENV A=1',
        'CMD ["old"]',
        'USER 1000:1000',
        'ENTRYPOINT ["x", "y"]',
      ].join('\n'),
    );
    assert.deepEqual(spec.aptPackages, ['git', 'python3']);
    assert.deepEqual(spec.entrypoint, ['x', 'y']);
    assert.deepEqual(spec.cmd, [], 'ENTRYPOINT resets an earlier CMD');
    const cfg = ociImageConfig(spec, ['sha256:a'], 'v22.1.0') as { config: Record<string, unknown> };
    assert.equal(cfg.config.User, '1000:1000');
    assert.equal(cfg.config.WorkingDir, '/app');
    assert.ok((cfg.config.Env as string[]).includes('A=1'));
    assert.ok((cfg.config.Env as string[]).includes('NODE_VERSION=22.1.0'));
    assert.equal(cfg.config.Cmd, undefined);
  });

  it('refuses what the local assembly cannot reproduce, with a stable reason', () => {
    for (const bad of [
      'FROM alpine',
      `FROM ${BASE_IMAGE}\nRUN curl -o x https://example.invalid`,
      `FROM ${BASE_IMAGE}\nENTRYPOINT kruntimes`,
      `FROM ${BASE_IMAGE}\nADD x /x`,
      `FROM ${BASE_IMAGE} AS bundle\nRUN make\nFROM ${BASE_IMAGE}`,
      `FROM ${BASE_IMAGE} AS other\nRUN npm ci\nFROM ${BASE_IMAGE}\nCOPY --from=other /src/dist ./dist`,
    ]) {
      assert.throws(
        () => parseDockerfile(bad),
        (e: unknown) => e instanceof DockerfileError && e.reason === 'UnsupportedDockerfile',
        bad,
      );
    }
    assert.deepEqual(aptPackagesOf('apt-get update && apt-get install -y a b'), ['a', 'b']);
  });

  it('starts the kruntimes entrypoint under a read-only TMPDIR (readOnlyRootFilesystem on a kubelet)', function () {
    if (process.getuid?.() !== 0) this.skip();
    const dir = mkdtempSync(join(tmpdir(), 'krt-ro-'));
    try {
      // A private mount namespace with a read-only tmpfs as TMPDIR: what a container with
      // readOnlyRootFilesystem sees at /tmp. tsx's cache must not stop the program.
      const out = execFileSync(
        'unshare',
        [
          '--mount',
          'sh',
          '-c',
          'mount -t tmpfs -o ro tmpfs "$1" && TMPDIR="$1" "$2" version',
          'sh',
          dir,
          join(REPO_ROOT, 'images/kruntimes/bin/kruntimes'),
        ],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 },
      );
      assert.match(out, /^kruntimes \d+\.\d+\.\d+/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
