/** The entrypoint of the kruntimes image: `kruntimes <component> [args]`. */
import { createServer } from 'node:http';
import { VERSION } from '../lib/version.ts';
import { runtimeServer } from './runtime-server.ts';

type Handler = (args: string[]) => Promise<number>;

/** A sample batch workload: prints a few lines, then exits with the given code (default 0). */
const demoJob: Handler = async (args) => {
  const steps = Number(process.env.DEMO_STEPS ?? '3');
  for (let i = 1; i <= steps; i++) {
    process.stdout.write(
      `demo-job step ${i}/${steps} on ${process.env.HOSTNAME ?? '?'} (pod IP ${process.env.POD_IP ?? '?'})\n`,
    );
    await new Promise((r) => setTimeout(r, 50));
  }
  process.stdout.write('demo-job done\n');
  return Number(args[0] ?? '0');
};

/** A sample long-running server: answers /healthz on POD_IP:PORT until SIGTERM. */
const demoServer: Handler = (args) =>
  new Promise((resolve) => {
    const port = Number(args[0] ?? process.env.PORT ?? '8080');
    const host = process.env.POD_IP ?? '127.0.0.1';
    const srv = createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end(`ok ${req.url ?? ''}\n`);
    });
    srv.listen(port, host, () => process.stdout.write(`demo-server listening on ${host}:${port}\n`));
    process.on('SIGTERM', () => {
      process.stdout.write('demo-server: SIGTERM, shutting down\n');
      srv.close(() => resolve(0));
    });
  });

/** The other components' module (pino, the Kubernetes client) loads only when one of them starts. */
const components_ = (): Promise<typeof import('./components.ts')> => import('./components.ts');

const components: Record<string, Handler> = {
  version: () => {
    process.stdout.write(`kruntimes ${VERSION}\n`);
    return Promise.resolve(0);
  },
  'demo-job': demoJob,
  'demo-server': demoServer,
  apiserver: async () => (await components_()).apiserver(),
  dashboard: async () => (await components_()).dashboard(),
  fn: async (args) => (await components_()).fnRun(args),
  runtimed: async () => (await components_()).runtimed(),
  'runtime-server': (args) => runtimeServer(args),
  'devws-node': async () => (await components_()).devwsNode(),
  'devws-git-server': async () => (await components_()).devwsGitServer(),
};

const [name, ...rest] = process.argv.slice(2);
const handler = components[name ?? ''];
if (!handler) {
  process.stderr.write(`kruntimes: unknown component "${name ?? ''}"; known: ${Object.keys(components).join(', ')}\n`);
  process.exit(2);
}
handler(rest).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`kruntimes ${name}: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
