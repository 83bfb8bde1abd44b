/**
 * runtimed's SIGTERM: a graceful stop (drain deleted Runs' artifacts, then stop the loops) that is
 * bounded. The drain talks to the API server, whose requests have no timeout of their own: with the
 * API server hung or gone, an unbounded stop kept runtimed alive after SIGTERM (with no node agent
 * left to SIGKILL it, for good). A second SIGTERM ends it at once.
 */
export type ShutdownEnd = 'stopped' | 'bound' | 'signal';

/** Settles when `stop` has finished, `boundMs` after the first SIGTERM, or at a second SIGTERM. */
export function gracefulShutdown(
  proc: { once: (ev: 'SIGTERM', fn: () => void) => unknown },
  stop: () => Promise<void>,
  boundMs: number,
): Promise<ShutdownEnd> {
  return new Promise((resolve) => {
    proc.once('SIGTERM', () => {
      const end = (how: ShutdownEnd): void => {
        clearTimeout(bound);
        resolve(how);
      };
      const bound = setTimeout(() => end('bound'), boundMs);
      proc.once('SIGTERM', () => end('signal'));
      stop()
        .catch(() => undefined)
        .finally(() => end('stopped'));
    });
  });
}

/** How long runtimed's stop may take after SIGTERM: the artifact drain's bound plus a little to stop. */
export function shutdownBoundMs(drainMs: number): number {
  return drainMs + 3000;
}
