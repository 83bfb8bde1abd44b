/** Long-running and one-shot components of the kruntimes image. */
import { pino } from 'pino';
import { defaultClient } from '../lib/kube/config.ts';
import { runCron } from '../lib/fn/cron.ts';
import { VERSION } from '../lib/version.ts';
import { loadServerConfig } from '../apiserver/config.ts';
import { cronFunctions, loadFunctions } from '../apiserver/functions.ts';
import { startServer } from '../apiserver/server.ts';

/** `kruntimes apiserver`: runs until SIGTERM, then drains and exits 0. */
export async function apiserver(): Promise<number> {
  const log = pino({ base: { component: 'extension-apiserver', version: VERSION } });
  const cfg = loadServerConfig(process.env);
  const client = defaultClient(process.env, `kruntimes-extension/${VERSION}`);
  const running = await startServer(cfg, await loadFunctions(), client, log);
  return new Promise((resolve) => {
    const stop = (sig: string): void => {
      log.info({ signal: sig }, 'shutting down: draining in-flight work');
      void running.stop().then(() => resolve(0), () => resolve(1));
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/** `kruntimes fn run <name>`: one invocation of a cron function; exit 0 ok, 1 terminal, 75 retry. */
export async function fnRun(args: string[]): Promise<number> {
  const [sub, name] = args;
  const log = pino({ base: { component: 'fn-run', function: name } });
  if (sub !== 'run' || !name) { process.stderr.write('usage: kruntimes fn run <function>\n'); return 2; }
  const fn = cronFunctions(await loadFunctions()).find((f) => f.name === name);
  if (!fn) { process.stderr.write(`kruntimes fn run: no cron function "${name}"\n`); return 2; }
  const result = await runCron(fn, defaultClient(process.env, `kruntimes-fn/${name}`));
  log[result.code === 0 ? 'info' : 'error']({ exitCode: result.code }, result.message);
  return result.code;
}
