/**
 * After the e2e run's global teardown, mocha (without `--exit`) waits for the event loop to drain.
 * A server or socket a spec forgot to close keeps it alive for ever, and the whole suite would hang
 * until CI's time limit with no word on why. The watchdog turns that into a failure that names
 * what is still open.
 */
export interface WatchdogDeps {
  /** Node's list of what keeps the loop alive (`process.getActiveResourcesInfo`). */
  resources: () => string[];
  write: (line: string) => void;
  exit: (code: number) => void;
}

const defaultDeps: WatchdogDeps = {
  resources: () => process.getActiveResourcesInfo(),
  write: (line) => process.stderr.write(line),
  exit: (code) => process.exit(code),
};

/** What is still open, counted by kind (timers are left out: the watchdog's own is one of them). */
export function leftovers(resources: string[]): string {
  const counts = new Map<string, number>();
  for (const r of resources) if (r !== 'Timeout') counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([kind, n]) => `${kind} × ${n}`).join(', ');
}

/**
 * Exits the process with status 1 if it is still running `ms` after this call, naming what keeps
 * it alive. The timer is unref'd: a process that drains exits normally and never sees it.
 */
export function armExitWatchdog(ms: number, deps: WatchdogDeps = defaultDeps): NodeJS.Timeout {
  const timer = setTimeout(() => {
    const open = leftovers(deps.resources()) || 'nothing Node lists';
    deps.write(`e2e: the run did not exit ${ms / 1000} s after its teardown; still open: ${open}\n`);
    deps.write('e2e: a spec left a server, socket or child process open (close it in after/afterEach)\n');
    deps.exit(1);
  }, ms);
  timer.unref();
  return timer;
}
