/**
 * Soak under faults (issue 18; not a test): a steady mixed load on a fresh local environment
 * while a seeded fault injector kills or pauses runtimed, the Runtime Server, the extension
 * server, the node agent, kube-apiserver and etcd and deletes Runtime Pods; then every item is
 * accounted for (terminal exactly once, outputs and artifact digests as written, one execution,
 * nothing stuck or orphaned) and the result table is printed. Exit code 1 when an invariant fails.
 *   npm run soak -- --minutes 3                     # the CI-sized variant
 *   npm run soak -- --minutes 30 --rate 2 --seed 7  # the long one
 * Options: --minutes (30), --rate items/s (2), --max-items (5000), --seed (1), --fault-gap mean
 * seconds between faults (20), --targets comma list (all), --no-faults, --drain seconds (240),
 * --settle seconds between the namespace deletion and the "after" memory reading (120).
 * KRT_SOAK_HEAP_SNAPSHOTS=<dir>: heap snapshots of the extension server and kube-apiserver heap
 * profiles at the baseline, after the drain and after the settle (bench/soak/heap-summary.ts).
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { clean, formatResult } from './soak/accounting.ts';
import { keepLogs } from './soak/diagnostics.ts';
import { DEFAULT_TARGETS, DEFAULT_WEIGHTS, runSoak, type SoakOptions } from './soak/run.ts';
import { FAULT_TARGETS, type FaultTarget } from './soak/schedule.ts';

export function parseSoakArgs(argv: string[]): Omit<SoakOptions, 'root' | 'api' | 'log'> {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '2' },
      'max-items': { type: 'string', default: '5000' },
      seed: { type: 'string', default: '1' },
      'fault-gap': { type: 'string', default: '20' },
      targets: { type: 'string', default: DEFAULT_TARGETS.join(',') },
      'no-faults': { type: 'boolean', default: false },
      drain: { type: 'string', default: '240' },
      settle: { type: 'string', default: '120' },
    },
  });
  const num = (k: string, s: string | undefined): number => {
    const n = Number(s);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${k} must be a positive number, got ${s}`);
    return n;
  };
  const targets = (v['no-faults'] ? '' : (v.targets ?? '')).split(',').filter(Boolean);
  for (const t of targets)
    if (!FAULT_TARGETS.includes(t as FaultTarget))
      throw new Error(`unknown fault target ${t} (${FAULT_TARGETS.join(', ')})`);
  return {
    minutes: num('minutes', v.minutes),
    rate: num('rate', v.rate),
    maxItems: num('max-items', v['max-items']),
    seed: num('seed', v.seed),
    meanFaultGapS: num('fault-gap', v['fault-gap']),
    targets: targets as FaultTarget[],
    weights: DEFAULT_WEIGHTS,
    drainMs: num('drain', v.drain) * 1000,
    settleMs: num('settle', v.settle) * 1000,
  };
}

async function main(): Promise<void> {
  const opts = parseSoakArgs(process.argv.slice(2));
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `soak-${process.pid}`);
  const log = (m: string): void => void process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${m}\n`);
  let ok = false;
  // Stopped from outside (a time limit): the environment goes down with the harness.
  process.once('SIGINT', () => {
    log('interrupted: stopping the environment');
    void down(root, { purge: true }).finally(() => process.exit(130));
  });
  const env = await up({
    root,
    nodes: ['soak-a', 'soak-b'],
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
    progress: log,
  }).catch(async (err: unknown) => {
    await down(root, { purge: process.env.BENCH_KEEP !== '1' });
    throw err;
  });
  try {
    const diagnosticsFile = join(REPO_ROOT, '.kruntimes', `soak-diagnostics-${process.pid}.json`);
    const r = await runSoak({ ...opts, root, api: env.admin, log, diagnosticsFile });
    process.stdout.write(
      `soak: ${opts.minutes} min, ${opts.rate} items/s, seed ${opts.seed}, fault targets ${opts.targets.join(', ') || 'none'}\n`,
    );
    process.stdout.write(formatResult(r));
    ok = clean(r);
  } finally {
    env.admin.close();
    if (!ok) {
      // Before the environment goes: every component's and container's log, for tracing what failed.
      const logs = join(REPO_ROOT, '.kruntimes', `soak-logs-${process.pid}`);
      keepLogs(root, logs);
      log(`the environment's logs are in ${logs}`);
    }
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
  process.exit(ok ? 0 : 1);
}

if (process.argv[1]?.endsWith('soak.ts')) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
