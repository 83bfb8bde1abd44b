/**
 * Artifact cleanup of deleted Runs by any runtimed of their Runtime (not only the Pod that ran
 * them): a Run with artifacts carries the kruntimes.io/artifact-cleanup finalizer; when it is
 * deleted, a runtimed of the same Runtime configured for the same store (store hash of the Run's
 * status.artifactStore snapshot) deletes the bytes and removes the finalizer. The assigned Pod
 * acts at once, other Pods after OTHER_POD_DELAY_MS (both are idempotent). On SIGTERM, runtimed
 * drains: while its namespace is terminating (or Runs of its Runtime are being deleted) it keeps
 * cleaning for up to its drain bound, so deleting a namespace does not leave Runs stuck after the
 * Runtime Pods are gone. What no runtimed can clean, the run-artifact-gc function releases after a
 * bounded wait (docs/adr/0011-run-fencing-and-artifact-cleanup.md).
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import type { RuntimedConfig } from './config.ts';
import {
  RUN_ARTIFACT_FINALIZER,
  storeHash,
  type ArtifactStore,
  type RuntimeArtifactStoreSpec,
} from './artifacts/index.ts';
import type { Run } from './types.ts';

export const OTHER_POD_DELAY_MS = 2_000;
export const RETRY_MS = 5_000;
export const DELETE_TIMEOUT_MS = 30_000;
/** After SIGTERM, how long runtimed looks for signs of a namespace deletion while Runs hold artifacts. */
export const SETTLE_MS = 5_000;
const RUNTIMED_SA = 'kruntimes-runtimed';

export type CleanupPlan = { act: false; why: string } | { act: true; delayMs: number };

/** Whether (and when) this runtimed cleans up a Run's artifacts. Pure. */
export function cleanupPlan(
  run: Run,
  me: { podName: string; runtime: string; store?: RuntimeArtifactStoreSpec },
): CleanupPlan {
  if (!run.metadata.deletionTimestamp) return { act: false, why: 'not deleted' };
  if (!(run.metadata.finalizers ?? []).includes(RUN_ARTIFACT_FINALIZER)) return { act: false, why: 'no finalizer' };
  if (run.spec.runtime !== me.runtime) return { act: false, why: 'another Runtime' };
  if (!me.store) return { act: false, why: 'this Runtime has no artifact store' };
  const snapshot = run.status?.artifactStore as RuntimeArtifactStoreSpec | undefined;
  if (snapshot && storeHash(snapshot) !== storeHash(me.store))
    return { act: false, why: 'the Run used another store than this Runtime has now' };
  return { act: true, delayMs: run.status?.assignedPod === me.podName ? 0 : OTHER_POD_DELAY_MS };
}

const runsPath = (ns: string): string => `/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs`;

export class ArtifactCleaner {
  private readonly cleaning = new Set<string>();
  private watch?: ListWatch<Run>;

  constructor(private readonly d: { client: KubeClient; cfg: RuntimedConfig; store?: ArtifactStore; log: Logger }) {}

  private plan(run: Run): CleanupPlan {
    const { cfg } = this.d;
    return cleanupPlan(run, {
      podName: cfg.podName,
      runtime: cfg.runtime,
      ...(cfg.artifactStore ? { store: cfg.artifactStore as unknown as RuntimeArtifactStoreSpec } : {}),
    });
  }

  /** Watches the Runs of this Runtime (selectable field spec.runtime) for deletions to clean up. */
  async start(): Promise<void> {
    if (!this.d.store) return;
    this.watch = new ListWatch<Run>(
      this.d.client,
      {
        path: runsPath(this.d.cfg.namespace),
        fieldSelector: `spec.runtime=${this.d.cfg.runtime}`,
        onError: (err) => this.d.log.warn({ err }, 'artifact cleanup watch error'),
      },
      (delta) => {
        if (delta.type !== 'deleted') this.offer(delta.object);
      },
    );
    this.watch.start();
    await this.watch.synced;
  }

  stop(): void {
    this.watch?.stop();
  }

  /** Schedules the cleanup of a deleted Run when this runtimed should do it. */
  offer(run: Run, delayMs?: number): void {
    const p = this.plan(run);
    if (!p.act) return;
    setTimeout(() => void this.clean(run), delayMs ?? p.delayMs);
  }

  /** Deletes the Run's bytes (bounded) and removes the finalizer; retries every RETRY_MS on failure. */
  async clean(run: Run): Promise<void> {
    const uid = run.metadata.uid ?? '';
    if (this.cleaning.has(uid)) return;
    this.cleaning.add(uid);
    try {
      const fresh = await this.refetch(run);
      if (!fresh || !this.plan(fresh).act) return;
      await this.deleteBytes(fresh);
      await this.dropFinalizer(fresh);
      this.d.log.info({ run: run.metadata.name, uid }, 'artifacts of the deleted Run removed from the store');
    } catch (err) {
      this.d.log.warn({ err, run: run.metadata.name }, `artifact cleanup failed; retrying in ${RETRY_MS / 1000}s`);
      setTimeout(() => this.offer(run, 0), RETRY_MS).unref();
    } finally {
      this.cleaning.delete(uid);
    }
  }

  private async deleteBytes(run: Run): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, rej) => {
      timer = setTimeout(
        () => rej(new Error(`artifact deletion timed out after ${DELETE_TIMEOUT_MS}ms`)),
        DELETE_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([this.d.store!.deleteRun(run.metadata.namespace ?? '', run.metadata.uid ?? ''), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Removes only our finalizer, guarded by the resourceVersion (a conflict is retried by the caller). */
  private async dropFinalizer(run: Run): Promise<void> {
    const finalizers = (run.metadata.finalizers ?? []).filter((f) => f !== RUN_ARTIFACT_FINALIZER);
    try {
      await this.d.client.patch(`${runsPath(run.metadata.namespace ?? '')}/${run.metadata.name}`, {
        metadata: { resourceVersion: run.metadata.resourceVersion, finalizers },
      });
    } catch (err) {
      if (!isApiError(err, 404)) throw err;
    }
  }

  private async refetch(run: Run): Promise<Run | undefined> {
    try {
      return await this.d.client.get<Run>(`${runsPath(run.metadata.namespace ?? '')}/${run.metadata.name}`);
    } catch (err) {
      if (isApiError(err, 404)) return undefined;
      throw err;
    }
  }

  /** Whether the namespace is being deleted or this runtimed's Runtime is gone or being deleted. */
  private async going(): Promise<{ namespace: boolean; runtime: boolean }> {
    const { client, cfg } = this.d;
    const deleting = async (path: string): Promise<boolean> => {
      try {
        return !!(await client.get(path)).metadata.deletionTimestamp;
      } catch (err) {
        if (isApiError(err, 404)) return true;
        this.d.log.warn({ err, path }, 'drain: cannot tell whether it is being deleted');
        return false;
      }
    };
    // runtimed's own ServiceAccount keeps a finalizer while Runs need cleanup, so it shows a
    // namespace being emptied even where `get namespaces` is not granted.
    const namespace =
      (await deleting(`/api/v1/namespaces/${cfg.namespace}`)) ||
      (await deleting(`/api/v1/namespaces/${cfg.namespace}/serviceaccounts/${RUNTIMED_SA}`));
    return {
      namespace,
      runtime: await deleting(`/apis/kruntimes.io/v1alpha1/namespaces/${cfg.namespace}/runtimes/${cfg.runtime}`),
    };
  }

  /**
   * On SIGTERM: while the namespace is terminating (its Runs are about to be deleted) or Runs of
   * this Runtime are being deleted with the finalizer, keep cleaning, for at most boundMs.
   */
  async drain(boundMs: number, sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))): Promise<void> {
    if (!this.d.store) return;
    const until = Date.now() + boundMs;
    // A namespace deletion deletes kinds in no fixed order: the signals may show shortly after SIGTERM.
    const settleUntil = Date.now() + Math.min(SETTLE_MS, boundMs);
    while (Date.now() < until) {
      const going = await this.going();
      const holders = (this.watch?.store.list() ?? []).filter((r) =>
        (r.metadata.finalizers ?? []).includes(RUN_ARTIFACT_FINALIZER),
      );
      const deleting = holders.filter((r) => r.metadata.deletionTimestamp);
      const settling = !going.namespace && !going.runtime && Date.now() < settleUntil;
      if (!deleting.length && !((going.namespace || settling) && holders.length)) return;
      await Promise.all(deleting.map((r) => this.clean(r)));
      await sleep(500);
    }
    this.d.log.warn({ boundMs }, 'drain bound reached; remaining artifact cleanups are left to run-artifact-gc');
  }
}
