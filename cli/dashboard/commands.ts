/** krt dashboard: the web dashboard on 127.0.0.1 with the current kubeconfig's identity. */
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import { connect, UsageError } from '../kube.ts';
import { startDashboard } from './server.ts';

interface Global {
  kubeconfig?: string;
  namespace?: string;
}

function openBrowser(url: string): void {
  const child = spawn(process.platform === 'darwin' ? 'open' : 'xdg-open', [url], { stdio: 'ignore', detached: true });
  child.on('error', () => undefined);
  child.unref();
}

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('serve the web dashboard on 127.0.0.1 with your kubeconfig identity (like kubectl proxy)')
    .option('--port <port>', 'port on 127.0.0.1 (default: any free port)', '0')
    .option('--no-open', 'do not open a browser')
    .action(async (o: { port: string; open: boolean }, cmd: Command) => {
      const port = Number(o.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port ${o.port}: not a port`);
      const c = connect(cmd.optsWithGlobals<Global>());
      const d = await startDashboard(c.client, { port, namespace: c.namespace });
      process.stdout.write(
        `krt dashboard: open ${d.loginUrl}\n(the address holds a login token for this session only; Ctrl-C stops the server)\n`,
      );
      if (o.open) openBrowser(d.loginUrl);
      await new Promise<void>((resolve) => process.once('SIGINT', resolve));
      await d.close();
    });
}
