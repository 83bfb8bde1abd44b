/**
 * `kruntimes runtime-server`: in a module of its own, so the Runtime Server (one per Runtime Pod)
 * loads neither pino nor the Kubernetes client that cmd/components.ts imports for the other components:
 * `kruntimes runtime-server --language bash|python [--work-dir /workspace]`.
 */
export async function runtimeServer(args: string[]): Promise<number> {
  const flag = (name: string, def: string): string => {
    const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`));
    if (i < 0) return def;
    const a = args[i] ?? '';
    return a.includes('=') ? a.slice(a.indexOf('=') + 1) : (args[i + 1] ?? def);
  };
  const language = flag('language', 'bash');
  if (language !== 'bash' && language !== 'python') {
    process.stderr.write(`runtime-server: --language must be bash or python, got ${language}\n`);
    return 2;
  }
  const { RUNTIME_SOCKET } = await import('../runtimed/config.ts');
  const socket = process.env.KRT_RUNTIME_SOCKET ?? RUNTIME_SOCKET;
  const { startRuntimeServer } = await import('../runtimed/runtime-server/server.ts');
  const say = (level: number, msg: string): boolean =>
    process.stderr.write(`${JSON.stringify({ level, component: 'runtime-server', language, socket, msg })}\n`);
  return new Promise((resolve) => {
    // runtimed gone for good (no dial connected for DIAL_DEFAULTS.giveUpMs): exit, not dial forever.
    const srv = startRuntimeServer(socket, language, process.env, () => {
      say(50, 'runtimed has been unreachable for too long (gone for good): exiting');
      srv.close();
      resolve(1);
    });
    say(30, 'runtime server listening');
    process.once('SIGTERM', () => {
      srv.close();
      resolve(0);
    });
  });
}
