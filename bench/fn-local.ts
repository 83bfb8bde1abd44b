/**
 * The function benches' pieces without a cluster (bench/functions-local.ts, bench/gateway-cpu.ts):
 * a Runtime Server child process with an echo handler registered, dialled in as in a Runtime Pod,
 * and the Runtime Gateway in this process with authorization answered as allowed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { DialIn } from '../runtimed/dial-in.ts';
import { startGateway, type Gateway, type GatewayDeps } from '../runtimed/gateway.ts';
import { RuntimeClient } from '../runtimed/runtime-client.ts';
import type { Run } from '../runtimed/types.ts';
import { podEnv } from './pod-env.ts';

const HANDLERS = {
  bash: { handler: 'echo.echo', file: 'echo.sh', text: 'echo() { printf "%s" "$1"; }\n' },
  python: { handler: 'fns.echo.echo', file: 'fns/echo.py', text: 'def echo(p):\n    return p\n' },
};

/**
 * A Runtime Server child process for `lang` (the checkout at `root`, the environment without its
 * locale as in a Runtime Pod, plus `extraEnv`), dialled in, with the echo handler registered as
 * function id `lang`.
 */
export async function runtimeServer(
  dir: string,
  lang: 'bash' | 'python',
  name: string = lang,
  extraEnv: Record<string, string> = {},
  root = REPO_ROOT,
): Promise<{ rc: RuntimeClient; child: ChildProcess }> {
  const work = join(dir, `work-${name}`);
  const h = HANDLERS[lang];
  mkdirSync(join(work, 'fns'), { recursive: true });
  writeFileSync(join(work, h.file), h.text);
  const dial = new DialIn(join(dir, `${name}.sock`), 30_000);
  await dial.listen();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'cmd', 'kruntimes.ts'), 'runtime-server', '--language', lang],
    {
      env: podEnv(process.env, { ...extraEnv, KRT_RUNTIME_SOCKET: dial.path }),
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const rc = new RuntimeClient(dial);
  await rc.registerFunction({ id: lang, handler: h.handler, workingDir: work });
  return { rc, child };
}

/** The Runtime Gateway on 127.0.0.1 (namespace `bench`, logs discarded, every caller allowed) in front of `target`. */
export function localGateway(target: GatewayDeps['target'], metrics?: GatewayDeps['metrics']): Promise<Gateway> {
  return startGateway({
    address: '127.0.0.1',
    port: 0,
    namespace: 'bench',
    client: undefined as unknown as KubeClient,
    log: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true })),
    review: () => Promise.resolve('allowed'),
    target,
    ...(metrics ? { metrics } : {}),
  });
}

/** The invoke endpoint of Run `name` (UID `u`) on a local gateway. */
export function localEndpoint(gw: Gateway, name: string): ReturnType<Gateway['endpoint']> {
  return gw.endpoint({ metadata: { namespace: 'bench', name, uid: 'u' } } as Run);
}
