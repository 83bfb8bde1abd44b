/** Mocha global fixtures: the e2e control plane is started once per run (this file is only required by e2e configs). */
import { startCluster, stopCluster } from './cluster.ts';

export async function mochaGlobalSetup(): Promise<void> {
  await startCluster();
}

export async function mochaGlobalTeardown(): Promise<void> {
  await stopCluster();
}
