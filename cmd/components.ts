/**
 * Long-running and one-shot components of the kruntimes image. Each component imports its own
 * modules when it starts, so a per-Pod component (runtimed, the Runtime Server) never loads the
 * extension server's dependencies (the bundle splits them into separate chunks).
 */
import { pino } from 'pino';
import { defaultClient } from '../lib/kube/config.ts';
import { VERSION } from '../lib/version.ts';

/** `kruntimes apiserver`: runs until SIGTERM, then drains and exits 0. */
export async function apiserver(): Promise<number> {
  const { loadServerConfig } = await import('../apiserver/config.ts');
  const { loadFunctions } = await import('../apiserver/functions.ts');
  const { startServer } = await import('../apiserver/server.ts');
  const log = pino({ base: { component: 'extension-apiserver', version: VERSION } });
  const cfg = loadServerConfig(process.env);
  const client = defaultClient(process.env, `kruntimes-extension/${VERSION}`);
  const running = await startServer(cfg, await loadFunctions(), client, log);
  return new Promise((resolve) => {
    const stop = (sig: string): void => {
      log.info({ signal: sig }, 'shutting down: draining in-flight work');
      void running.stop().then(
        () => resolve(0),
        () => resolve(1),
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/** `kruntimes fn serve [name...]`: the function server of watch functions (all when none named); until SIGTERM. */
export async function fnServe(names: string[]): Promise<number> {
  const { loadFunctions, watchFunctions } = await import('../apiserver/functions.ts');
  const { loadFnServerConfig, startFnServer } = await import('../apiserver/fnserver.ts');
  const log = pino({ base: { component: 'fn-serve', version: VERSION } });
  const all = watchFunctions(await loadFunctions());
  const unknown = names.filter((n) => !all.some((f) => f.name === n));
  if (unknown.length) {
    process.stderr.write(`kruntimes fn serve: no watch function ${unknown.join(', ')}\n`);
    return 2;
  }
  const served = names.length ? all.filter((f) => names.includes(f.name)) : all;
  const srv = await startFnServer(loadFnServerConfig(process.env), served, log);
  return new Promise((resolve) => {
    process.once('SIGTERM', () => {
      log.info('SIGTERM: finishing in-flight invocations');
      void srv.stop().then(() => resolve(0));
    });
  });
}

/** `kruntimes fn list`: one line per function, `<name> <trigger>`, as this build loads them. */
async function fnList(): Promise<number> {
  const { loadFunctions } = await import('../apiserver/functions.ts');
  for (const fn of await loadFunctions()) process.stdout.write(`${fn.name} ${fn.trigger.type}\n`);
  return 0;
}

/** `kruntimes fn run <name>` (one invocation of a cron function; exit 0 ok, 1 terminal, 75 retry), `fn serve`, `fn list`. */
export async function fnRun(args: string[]): Promise<number> {
  const [sub, name] = args;
  if (sub === 'serve') return fnServe(args.slice(1));
  if (sub === 'list') return fnList();
  const log = pino({ base: { component: 'fn-run', function: name } });
  if (sub !== 'run' || !name) {
    process.stderr.write('usage: kruntimes fn run <function> | kruntimes fn serve [function...] | kruntimes fn list\n');
    return 2;
  }
  const { cronFunctions, loadFunctions } = await import('../apiserver/functions.ts');
  const { runCron } = await import('../lib/fn/cron.ts');
  const fn = cronFunctions(await loadFunctions()).find((f) => f.name === name);
  if (!fn) {
    process.stderr.write(`kruntimes fn run: no cron function "${name}"\n`);
    return 2;
  }
  const result = await runCron(fn, defaultClient(process.env, `kruntimes-fn/${name}`));
  log[result.code === 0 ? 'info' : 'error']({ exitCode: result.code }, result.message);
  return result.code;
}

/** `kruntimes runtimed`: the daemon of a Runtime Pod. Run output goes to stdout as JSON records; its own logs to stderr. */
export async function runtimed(): Promise<number> {
  const { loadRuntimedConfig } = await import('../runtimed/config.ts');
  const cfg = loadRuntimedConfig(process.env);
  // The socket first: the Runtime Server (started beside runtimed) dials in while the rest loads.
  const { DialIn } = await import('../runtimed/dial-in.ts');
  const channel = new DialIn(cfg.socketPath);
  await channel.listen();
  const { RuntimeClient } = await import('../runtimed/runtime-client.ts');
  const { startDaemon } = await import('../runtimed/daemon.ts');
  const { makeFinisher } = await import('../runtimed/artifact-finisher.ts');
  const log = pino({ base: { component: 'runtimed', version: VERSION } }, pino.destination(2));
  const client = defaultClient(process.env, `kruntimes-runtimed/${VERSION}`);
  const runtime = new RuntimeClient(channel);
  const { recorderFor } = await import('../runtimed/runner.ts');
  const daemon = await startDaemon({
    client,
    cfg,
    runtime,
    finisher: await makeFinisher(cfg, recorderFor(client)),
    log,
  });
  const { gracefulShutdown, shutdownBoundMs } = await import('../runtimed/shutdown.ts');
  const end = await gracefulShutdown(
    process,
    () =>
      daemon
        .drain(cfg.drainMs)
        .catch((err: unknown) => log.warn({ err }, 'drain failed'))
        .then(() => daemon.stop()),
    shutdownBoundMs(cfg.drainMs),
  );
  if (end !== 'stopped') log.warn({ end }, 'stop did not finish: exiting anyway');
  return 0;
}

/** `kruntimes dashboard`: the web dashboard in the cluster (kustomize/components/dashboard); until SIGTERM. */
export async function dashboard(): Promise<number> {
  const { inClusterOptions, startInClusterDashboard } = await import('../cli/dashboard/incluster.ts');
  const log = pino({ base: { component: 'dashboard', version: VERSION } });
  const o = inClusterOptions(process.env);
  const d = await startInClusterDashboard({
    ...o,
    onReload: (e) =>
      e.event === 'reloaded'
        ? log.info('reloaded the serving certificate')
        : log.warn({ err: e.err }, 'serving certificate reload failed; keeping the old one'),
  });
  log.info({ url: d.origin, auth: o.auth, port: o.port }, 'dashboard serving');
  return new Promise((resolve) => {
    process.once('SIGTERM', () => void d.close().then(() => resolve(0)));
  });
}

/** `kruntimes devws-node`: the Node agent of a developer workspace's sandbox Pod (ADR 0020); until SIGTERM. */
export async function devwsNode(): Promise<number> {
  const { loadNodeConfig, NodeAgent, runNodeAgent } = await import('../runtimed/devws-node.ts');
  const cfg = loadNodeConfig(process.env);
  const log = pino({ base: { component: 'devws-node', workspace: cfg.workspace, sandbox: cfg.self.sandboxId } });
  const agent = new NodeAgent(cfg, defaultClient(process.env, `kruntimes-devws-node/${VERSION}`), log);
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  await runNodeAgent(agent, cfg, log, stop.signal);
  return 0;
}

/** `kruntimes devws-git-server`: the Git Server of developer workspaces (ADR 0020); until SIGTERM. */
export async function devwsGitServer(): Promise<number> {
  const { loadGitServerOptions, startGitServer } = await import('../runtimed/devws-git-server.ts');
  const log = pino({ base: { component: 'devws-git-server', version: VERSION } });
  const o = loadGitServerOptions(process.env);
  const srv = await startGitServer({ ...o, onError: (err) => log.warn({ err }, 'git server request failed') });
  log.info({ url: srv.url, root: o.root }, 'git server serving');
  return new Promise((resolve) => {
    process.once('SIGTERM', () => void srv.close().then(() => resolve(0)));
  });
}
