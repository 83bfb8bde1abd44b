/** `krt local up|down|status`: the embedded local environment. */
import type { Command } from 'commander';
import { down, status, up, apiHealthy } from '../../localenv/environment.ts';
import { LOCAL_ENV_DIR } from '../../localenv/paths.ts';
import { runDemo } from './demo.ts';

const say = (msg: string): void => {
  process.stderr.write(`  ${msg}\n`);
};

export function registerLocal(program: Command): void {
  const local = program.command('local').description('the embedded local Kubernetes environment (no Docker)');
  local
    .command('up')
    .description('build (once) and start etcd, kube-apiserver, controller-manager, scheduler and the node agent')
    .option('--demo', 'run the main demo once the environment is up')
    .action(async (opts: { demo?: boolean }) => {
      const t0 = Date.now();
      process.stderr.write('krt local up\n');
      const env = await up({ root: LOCAL_ENV_DIR, progress: say });
      process.stderr.write(
        `environment ready in ${((Date.now() - t0) / 1000).toFixed(1)}s: API server ${env.server}\n`,
      );
      process.stdout.write(`export KUBECONFIG=${env.kubeconfig}\n`);
      if (opts.demo) await runDemo(env, say);
      env.admin.close();
    });
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
