/** `krt local up|down|status`: the embedded local environment. */
import type { Command } from 'commander';
import { down, status, up, apiHealthy, NODE_KINDS, type NodeKind, type UpOptions } from '../../localenv/environment.ts';
import { ImageImportError, importImageArchives } from '../../localenv/image-import.ts';
import { LOCAL_ENV_DIR } from '../../localenv/paths.ts';
import { runDemo } from './demo.ts';
import { runDevwsDemo } from './devws-demo.ts';
import { join } from 'node:path';
import { clientFromKubeconfig } from '../../lib/kube/config.ts';
import { POD_GATEWAY } from '../../localenv/kubelet-config.ts';

const say = (msg: string): void => {
  process.stderr.write(`  ${msg}\n`);
};

/** What `krt local up`'s options ask of up(): the node kind, and whether kruntimes is installed. */
export function localUpOptions(opts: { node?: string; install?: boolean }): UpOptions {
  return {
    root: LOCAL_ENV_DIR,
    progress: say,
    ...(opts.node ? { nodeKind: opts.node as NodeKind } : {}),
    ...(opts.install === false ? { install: false } : {}),
  };
}

export function registerLocal(program: Command): void {
  const local = program.command('local').description('the embedded local Kubernetes environment (no Docker)');
  local
    .command('up')
    .description('build (once) and start etcd, kube-apiserver, controller-manager, scheduler and the node agent')
    .option('--demo', 'run the main demo once the environment is up')
    .option(
      '--node <kind>',
      'node kind of a new environment: agent (the TypeScript node agent) or kubelet (kubelet + containerd + runc, ' +
        'root, scripts/setup.sh --kubelet; docs/kubelet-node.md)',
    )
    .option('--no-install', 'do not install kruntimes: a bare Kubernetes of this node kind (control plane and node)')
    .action(async (opts: { demo?: boolean; node?: string; install?: boolean }) => {
      const t0 = Date.now();
      if (opts.node !== undefined && !NODE_KINDS.includes(opts.node as NodeKind)) {
        process.stderr.write(`krt local up: --node must be one of ${NODE_KINDS.join(', ')} (got "${opts.node}")\n`);
        process.exitCode = 2;
        return;
      }
      process.stderr.write('krt local up\n');
      const env = await up(localUpOptions(opts));
      process.stderr.write(
        `environment ready in ${((Date.now() - t0) / 1000).toFixed(1)}s: API server ${env.server}\n`,
      );
      process.stdout.write(`export KUBECONFIG=${env.kubeconfig}\n`);
      if (opts.demo) await runDemo(env, say);
      env.admin.close();
    });
  registerImage(local);
  registerDevwsDemo(local);
  local
    .command('down')
    .description('stop everything `up` started')
    .option('--purge', 'also delete all state (etcd data, PKI, logs)')
    .option('--dir <path>', 'environment directory (default: the krt local one; tests and benchmarks use their own)')
    .action(async (opts: { purge?: boolean; dir?: string }) => {
      await down(opts.dir ?? LOCAL_ENV_DIR, { purge: !!opts.purge });
      process.stderr.write(`stopped${opts.purge ? ' and purged' : ''}\n`);
    });
  local
    .command('status')
    .description('report the health of every component')
    .action(async () => {
      const st = status(LOCAL_ENV_DIR);
      if (!st.state) {
        process.stdout.write('not created (run: krt local up)\n');
        process.exitCode = 3;
        return;
      }
      const healthy = await apiHealthy(LOCAL_ENV_DIR);
      for (const c of st.components)
        process.stdout.write(`${c.component.padEnd(26)} ${c.running ? `running (pid ${c.pid})` : 'stopped'}\n`);
      process.stdout.write(`${'api server /readyz'.padEnd(26)} ${healthy ? 'ok' : 'not ready'}\n`);
      process.stdout.write(`kubeconfig                 ${st.state.root}/kubeconfig\n`);
      if (!healthy || st.components.some((c) => !c.running)) process.exitCode = 1;
    });
}

/** `krt local demo-devws` (cli/local/devws-demo.ts) against the krt local environment. */
function registerDevwsDemo(local: Command): void {
  local
    .command('demo-devws')
    .description(
      'developer workspaces end to end from examples/devws/: create, stop, start, re-sync, an isolated Workspace, ' +
        'delete (the repository and the Git Server run in this process while it lasts)',
    )
    .action(async () => {
      const st = status(LOCAL_ENV_DIR).state;
      if (!st) throw new Error('krt local demo-devws: no local environment (run: krt local up)');
      const admin = clientFromKubeconfig(join(st.root, 'kubeconfig'));
      const host = st.nodeKind === 'kubelet' ? POD_GATEWAY : '127.0.0.1';
      const r = await runDevwsDemo({ admin, host, say });
      process.stdout.write(`demo-devws finished: namespace ${r.namespace}\n`);
      admin.close();
    });
}

/** `krt local image import`: OCI/docker archives into the kubelet kind's containerd (localenv/image-import.ts). */
function registerImage(local: Command): void {
  local
    .command('image')
    .description('images of the kubelet node kind')
    .command('import')
    .description(
      'import image archives (an OCI image layout directory or tar, or a docker save tar) into the kubelet ' +
        "kind's containerd, so Pods can run them with imagePullPolicy IfNotPresent",
    )
    .argument('<archive...>', 'OCI layout directories or tar files')
    .option('--dir <path>', 'environment directory (default: the krt local one)')
    .action((archives: string[], opts: { dir?: string }) => {
      try {
        for (const name of importImageArchives(opts.dir ?? LOCAL_ENV_DIR, archives)) process.stdout.write(`${name}\n`);
      } catch (err) {
        if (!(err instanceof ImageImportError)) throw err;
        process.stderr.write(`krt local image import: ${err.reason}: ${err.message}\n`);
        process.exitCode = 2;
      }
    });
}
