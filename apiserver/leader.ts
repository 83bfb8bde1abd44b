/** Lease-based leader election (coordination.k8s.io/v1), with optimistic concurrency on the Lease. */
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';

interface Lease extends KubeObject {
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    renewTime?: string;
    acquireTime?: string;
    leaseTransitions?: number;
  };
}

export interface ElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  durationSeconds?: number;
  log: Logger;
  now?: () => Date;
}

const micro = (d: Date): string => d.toISOString().replace('Z', '000Z');

/** Whether the identity may take the lease now: free, expired, or already ours. */
export function canAcquire(lease: Lease | undefined, identity: string, now: Date): boolean {
  if (!lease?.spec.holderIdentity) return true;
  if (lease.spec.holderIdentity === identity) return true;
  const renew = Date.parse(lease.spec.renewTime ?? '');
  const duration = (lease.spec.leaseDurationSeconds ?? 15) * 1000;
  return !Number.isFinite(renew) || renew + duration < now.getTime();
}

export class LeaderElector {
  private timer: NodeJS.Timeout | undefined;
  private readonly path: string;
  private readonly now: () => Date;
  private readonly duration: number;

  constructor(private readonly o: ElectionOptions) {
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${o.namespace}/leases/${o.name}`;
    this.now = o.now ?? (() => new Date());
    this.duration = o.durationSeconds ?? 15;
  }

  /** Tries once; true when this identity holds the lease afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.now();
    let lease: Lease | undefined;
    try {
      lease = await this.o.client.get<Lease>(this.path);
    } catch (err) {
      if (!isApiError(err, 404)) throw err;
    }
    if (!canAcquire(lease, this.o.identity, now)) return false;
    const transitions = (lease?.spec.leaseTransitions ?? 0) + (lease?.spec.holderIdentity === this.o.identity ? 0 : 1);
    const spec = {
      holderIdentity: this.o.identity,
      leaseDurationSeconds: this.duration,
      renewTime: micro(now),
      acquireTime: lease?.spec.holderIdentity === this.o.identity ? lease.spec.acquireTime : micro(now),
      leaseTransitions: transitions,
    };
    try {
      if (!lease)
        await this.o.client.create(`/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.o.name, namespace: this.o.namespace },
          spec,
        });
      else await this.o.client.replace(this.path, { ...lease, spec });
      return true;
    } catch (err) {
      if (isApiError(err, 409)) return false;
      throw err;
    }
  }

  /** Blocks until leadership is acquired, then renews; onLost fires if a renewal fails past the lease duration. */
  async run(onLost: () => void): Promise<void> {
    for (;;) {
      if (await this.tryAcquireOrRenew().catch(() => false)) break;
      await new Promise((r) => setTimeout(r, (this.duration * 1000) / 5));
    }
    this.o.log.info({ lease: this.o.name, identity: this.o.identity }, 'acquired leadership');
    let lastOk = Date.now();
    this.timer = setInterval(
      () => {
        this.tryAcquireOrRenew()
          .then((ok) => {
            if (ok) {
              lastOk = Date.now();
              return;
            }
            this.stop();
            onLost();
          })
          .catch(() => {
            if (Date.now() - lastOk > this.duration * 1000) {
              this.stop();
              onLost();
            }
          });
      },
      (this.duration * 1000) / 3,
    );
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Gives the lease up so a successor does not wait for it to expire. */
  async release(): Promise<void> {
    this.stop();
    try {
      const lease = await this.o.client.get<Lease>(this.path);
      if (lease.spec.holderIdentity === this.o.identity)
        await this.o.client.replace(this.path, {
          ...lease,
          spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 },
        });
    } catch {
      /* best effort */
    }
  }
}
