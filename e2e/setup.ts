/** Mocha global fixtures: the e2e control plane is started once per run (this file is only required by e2e configs). */
import { chmodSync, mkdirSync } from 'node:fs';
import { startCluster, stopCluster } from './cluster.ts';
import { armExitWatchdog } from './exit-watchdog.ts';

export async function mochaGlobalSetup(): Promise<void> {
  // Under c8 every Node.js process the node agent starts inherits NODE_V8_COVERAGE; containers
  // run as their images' non-root users, so the directory must be writable for them too, or
  // each of them prints EACCES on its stderr (into the Pod's log) when it exits.
  const coverage = process.env.NODE_V8_COVERAGE;
  if (coverage) {
    mkdirSync(coverage, { recursive: true });
    chmodSync(coverage, 0o1777);
  }
  await startCluster();
}

export async function mochaGlobalTeardown(): Promise<void> {
  await stopCluster();
  // Mocha runs without --exit: a handle a spec leaked would hang the suite; fail and name it instead.
  armExitWatchdog(120_000);
}
