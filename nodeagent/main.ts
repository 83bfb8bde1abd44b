/** kruntimes node agent: runs the Pods bound to its Nodes as host processes. */
import { pino } from 'pino';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clientFromKubeconfig } from '../lib/kube/config.ts';
import { NodeAgent } from './agent.ts';
import { loadConfig } from './config.ts';
import { LoopbackIPAM } from './ip.ts';
import { LocalDirProvisioner } from './provisioner.ts';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

async function main(argv: string[]): Promise<void> {
  const path = argv[0];
  if (!path) {
    process.stderr.write('usage: nodeagent <config.json>\n');
    process.exit(2);
  }
  const cfg = loadConfig(path);
  const log = pino({ base: { component: 'node-agent' } });
  const ipam = new LoopbackIPAM();
  const agents = cfg.nodes.map(
    (n) =>
      new NodeAgent(n, cfg, {
        client: clientFromKubeconfig(n.kubeconfig, `kruntimes-node-agent/${n.name}`),
        log,
        repoRoot: REPO_ROOT,
        now: () => new Date(),
        allocateIP: (uid) => ipam.allocate(uid),
        releaseIP: (uid) => ipam.release(uid),
      }),
  );
  if (cfg.provisioner) {
    new LocalDirProvisioner(
      clientFromKubeconfig(cfg.provisioner.kubeconfig, 'kruntimes-local-provisioner'),
      cfg.provisioner.root,
      log.child({ component: 'local-provisioner' }),
    ).start();
  }
  let stopping = false;
  const stop = (sig: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: sig }, 'stopping: terminating pod processes');
    void Promise.all(agents.map((a) => a.stop(10_000))).finally(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await Promise.all(agents.map((a) => a.start()));
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`node agent failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
