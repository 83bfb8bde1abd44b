import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));

/**
 * A stand-in node agent: a Node process that starts two containers through the agent's own
 * container-start path (container.ts launch, security-context.ts setprivArgs), one as root and one
 * as a non-root uid, prints their pids and then idles until it is killed.
 */
const AGENT = `
import { launch } from ${JSON.stringify(pathToFileURL(join(HERE, 'container.ts')).href)};
import { setprivArgs } from ${JSON.stringify(pathToFileURL(join(HERE, 'security-context.ts')).href)};
const dir = process.argv[1];
const start = (name, user) =>
  launch({ argv: ['sleep', '600'], env: { PATH: process.env.PATH }, workingDir: '/', mounts: [], logFile: dir + '/' + name + '.log', user }).pid;
const root = start('root', []);
const nonRoot = start('nonroot', setprivArgs({ uid: 65534, gid: 65534, groups: [], noNewPrivs: false }));
process.stdout.write(JSON.stringify({ root, nonRoot }) + '\\n');
setInterval(() => undefined, 1000);
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The container's command once the launcher has exec'ed it (setpriv, unshare and sh come first). */
async function execed(pid: number): Promise<void> {
  const { readFileSync } = await import('node:fs');
  const cmd = (): string => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
  while (cmd() !== 'sleep') await new Promise((r) => setTimeout(r, 20));
}

describe('nodeagent container lifetime (real processes)', () => {
  let dir: string;
  const started: number[] = [];
  before(function () {
    if (process.getuid?.() !== 0) this.skip(); // the node agent runs as root (mount namespaces, uid switch)
    dir = mkdtempSync(join(tmpdir(), 'krt-lifetime-'));
  });
  after(() => {
    for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a SIGKILLed node agent leaves no container process behind, root or non-root', async () => {
    const agent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', AGENT, dir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      agent.stdout.once('data', (c: Buffer) => resolve(c.toString('utf8')));
      agent.once('exit', (code) => reject(new Error(`the stand-in agent exited (${code}) before starting containers`)));
    });
    const { root, nonRoot } = JSON.parse(line) as { root: number; nonRoot: number };
    started.push(root, nonRoot);
    // Both run their own command, the non-root one after setpriv switched its uid.
    await execed(root);
    await execed(nonRoot);
    assert.ok(alive(root) && alive(nonRoot));
    agent.kill('SIGKILL');
    // The kernel delivers the parent-death signal: both end (polled until the mocha timeout).
    while (alive(root) || alive(nonRoot)) await new Promise((r) => setTimeout(r, 20));
  });
});
