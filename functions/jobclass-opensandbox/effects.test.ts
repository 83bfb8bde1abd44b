import assert from 'node:assert/strict';
import type { Operation } from '../../lib/fn/types.ts';
import type { Health, ListFilter, SandboxApi } from '../../lib/opensandbox/client.ts';
import { OpenSandboxError } from '../../lib/opensandbox/errors.ts';
import type {
  CreateSandboxRequest,
  CreateSandboxResponse,
  ListSandboxesResponse,
  Sandbox,
} from '../../lib/opensandbox/types.ts';
import { SANDBOX_FINALIZER, type Job, type OpenSandboxParameters } from '../../lib/jobclass/api.ts';
import {
  FakeState,
  JobHost,
  NOW,
  R,
  X,
  acceptedOpenSandboxJob,
  jobClass,
  osParams,
  secret,
  statuses,
  withLiveReads,
} from '../../lib/jobclass/testing.ts';
import { CREATE_WINDOW_MS } from './core.ts';
import { reconcileWithEffects, type Deps } from './effects.ts';
import fn from './index.ts';

const fetchDecl = fn.trigger.type === 'watch' ? fn.trigger.fetch : undefined;

/** An in-memory SandboxApi with fault injection. */
class FakeApi implements SandboxApi {
  sandboxes: Sandbox[] = [];
  calls: string[] = [];
  crashNextCreate = false;
  rateLimitCreates = 0;
  /** While > 0, list calls do not show sandboxes created by the last create (eventual consistency). */
  hideNewest = 0;
  failLists = false;
  unhealthy = false;
  private seq = 0;
  clock: () => Date = () => NOW;

  list(filter: ListFilter): Promise<ListSandboxesResponse> {
    this.calls.push('list');
    if (this.failLists) return Promise.reject(new OpenSandboxError('server', 'GET /sandboxes: HTTP 500'));
    let items = this.sandboxes.filter((s) =>
      Object.entries(filter.metadata ?? {}).every(([k, v]) => s.metadata?.[k] === v),
    );
    if (this.hideNewest > 0) {
      this.hideNewest--;
      items = items.slice(0, -1);
    }
    return Promise.resolve({
      items,
      pagination: { page: 1, pageSize: 100, totalItems: items.length, totalPages: 1, hasNextPage: false },
    });
  }
  async listAll(filter: ListFilter): Promise<Sandbox[]> {
    return (await this.list(filter)).items;
  }
  create(req: CreateSandboxRequest): Promise<CreateSandboxResponse> {
    this.calls.push('create');
    if (this.rateLimitCreates > 0) {
      this.rateLimitCreates--;
      return Promise.reject(
        new OpenSandboxError('rate-limited', 'POST /sandboxes: HTTP 429 KUBERNETES::POOL_CAPACITY_EXHAUSTED', {
          status: 429,
          retryAfterMs: 2000,
        }),
      );
    }
    const s: Sandbox = {
      id: `sb-${++this.seq}`,
      status: { state: 'Running' },
      metadata: req.metadata ?? {},
      entrypoint: req.entrypoint ?? [],
      createdAt: this.clock().toISOString(),
    };
    this.sandboxes.push(s);
    if (this.crashNextCreate) {
      this.crashNextCreate = false;
      return Promise.reject(
        new OpenSandboxError('network', 'POST /sandboxes: request failed (socket hang up)', { outcomeUnknown: true }),
      );
    }
    return Promise.resolve(s);
  }
  get(id: string): Promise<Sandbox | undefined> {
    return Promise.resolve(this.sandboxes.find((s) => s.id === id));
  }
  health(): Promise<Health> {
    this.calls.push('health');
    return Promise.resolve(
      this.unhealthy ? { healthy: false, message: 'GET /health: HTTP 503 unhealthy' } : { healthy: true },
    );
  }
  delete(id: string): Promise<'deleted' | 'not-found'> {
    this.calls.push(`delete ${id}`);
    const s = this.sandboxes.find((x) => x.id === id);
    if (!s) return Promise.resolve('not-found');
    s.status = { state: 'Terminated', reason: 'user_delete' };
    return Promise.resolve('deleted');
  }
}

class Host extends JobHost {
  readonly api: FakeApi;
  readonly deps: Deps;
  constructor(j: Job) {
    const state = new FakeState([
      [X.jobClasses, jobClass('microvm', { controller: 'opensandbox' })],
      [X.openSandboxParameters, osParams('microvm', { poolRef: 'microvm' })],
      [R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': 'k' })],
    ]);
    const api = new FakeApi();
    const deps: Deps = { api: () => api, policy: () => ({ insecureHosts: [] }) };
    super(
      j,
      state,
      withLiveReads(fetchDecl, (i) => reconcileWithEffects(i, deps)),
    );
    api.clock = () => this.now;
    this.api = api;
    this.deps = deps;
  }
}

const accepted = (spec: Partial<Job['spec']> = {}): Job => acceptedOpenSandboxJob(spec);
const sandboxID = (j: Job): string | undefined => j.status?.execution?.sandboxID;
const phase = (j: Job): string | undefined => j.status?.phase;

describe('jobclass-opensandbox effects (fake backend)', () => {
  it('lists before every create and creates exactly one sandbox on the happy path', async () => {
    const h = new Host(accepted());
    await h.until((j) => !!sandboxID(j));
    assert.deepEqual(h.api.calls, ['list', 'list', 'create']);
    assert.ok(h.job.metadata.finalizers?.includes(SANDBOX_FINALIZER));
    h.api.sandboxes[0]!.status = { state: 'Terminated', reason: 'completed' };
    await h.until((j) => phase(j) === 'Succeeded');
    await h.until((j) => !j.metadata.finalizers?.includes(SANDBOX_FINALIZER));
    assert.equal(h.api.sandboxes.length, 1);
  });

  it('a create whose answer was lost is adopted, not repeated', async () => {
    const h = new Host(accepted());
    h.api.crashNextCreate = true;
    await h.until((j) => !!sandboxID(j));
    assert.deepEqual(
      [h.api.sandboxes.length, h.api.calls.filter((c) => c === 'create').length, sandboxID(h.job)],
      [1, 1, 'sb-1'],
    );
  });

  it('a crash between create and the status write never produces a second sandbox, even with a lagging list', async () => {
    const h = new Host(accepted());
    await h.until((j) => j.status?.execution?.createIntent?.outcome === 'Pending');
    await h.step(true); // created, then the host died before writing the status
    assert.equal(h.api.sandboxes.length, 1);
    h.now = new Date(h.now.getTime() + CREATE_WINDOW_MS + 1);
    h.api.hideNewest = 3; // the new leader's lists do not show it yet
    for (let i = 0; i < 3; i++) await h.step();
    assert.equal(h.api.sandboxes.length, 1, 'no create while an earlier create may still land');
    assert.equal(h.job.status?.conditions?.find((c) => c.type === 'Scheduled')?.reason, 'CreateOutcomeUnknown');
    await h.until((j) => !!sandboxID(j));
    assert.deepEqual([h.api.sandboxes.length, sandboxID(h.job)], [1, 'sb-1']);
  });

  it('a class change wakes each waiting Job under its own key, and nothing but that key creates (soak: two sandboxes)', async () => {
    const h = new Host(accepted());
    h.state.put(X.jobs, h.job);
    const also = fn.trigger.type === 'watch' ? fn.trigger.also?.find((a) => a.resource === X.jobClasses) : undefined;
    const cls = h.state.get(X.jobClasses, undefined, 'microvm')!;
    assert.deepEqual(also?.map(cls, h.state), ['team-a/train', '@params:microvm']);
    // A key that is not the Job's (as the class keys were) must never act for it: had it run beside
    // the Job's own invocation, both would list nothing and both create.
    const ops = await reconcileWithEffects(
      { key: '@class:microvm', object: undefined, state: h.state, now: NOW },
      h.deps,
    );
    assert.deepEqual([ops, h.api.calls], [[], []]);
    await h.until((j) => !!sandboxID(j));
    assert.equal(h.api.sandboxes.length, 1);
  });

  it('reports pool exhaustion (429) as PoolExhausted and creates once capacity returns', async () => {
    const h = new Host(accepted());
    h.api.rateLimitCreates = 1;
    await h.until((j) => j.status?.conditions?.find((c) => c.type === 'Scheduled')?.reason === 'PoolExhausted');
    await h.until((j) => !!sandboxID(j));
    assert.equal(h.api.sandboxes.length, 1);
  });

  it('cleans up the sandbox of a deleted Job before releasing its finalizer', async () => {
    const h = new Host(accepted());
    await h.until((j) => !!sandboxID(j));
    h.job = { ...h.job, metadata: { ...h.job.metadata, deletionTimestamp: h.now.toISOString() } };
    await h.until((j) => !j.metadata.finalizers?.includes(SANDBOX_FINALIZER));
    assert.equal(h.api.sandboxes[0]?.status.state, 'Terminated');
  });

  it('reports ResultUnknown while the backend is down and recovers', async () => {
    const h = new Host(accepted());
    await h.until((j) => phase(j) === 'Running');
    h.api.failLists = true;
    await h.step();
    assert.equal(phase(h.job), 'Unknown');
    h.api.failLists = false;
    await h.step();
    assert.equal(phase(h.job), 'Running');
    assert.equal(h.api.sandboxes.length, 1);
  });

  it('probes parameters for BackendReachable, reading the API key Secret by name each time', async () => {
    const h = new Host(accepted());
    const probe = async (key: string): Promise<Operation[]> =>
      withLiveReads(fetchDecl, (i) => reconcileWithEffects(i, h.deps))({
        key,
        object: undefined,
        state: h.state,
        now: NOW,
      });
    const ok = statuses(await probe('@params:microvm'))[0] as OpenSandboxParameters['status'];
    assert.equal(ok?.conditions?.[0]?.status, 'True');
    h.api.failLists = true;
    assert.equal(
      (statuses(await probe('@params:microvm'))[0] as OpenSandboxParameters['status'])?.conditions?.[0]?.reason,
      'BackendUnreachable',
    );
    h.state.remove(R.secrets, 'ayatori-system', 'opensandbox-api');
    assert.equal(
      (statuses(await probe('@params:microvm'))[0] as OpenSandboxParameters['status'])?.conditions?.[0]?.reason,
      'ApiKeySecretNotFound',
    );
    assert.ok(h.api.calls.every((c) => c === 'list' || c === 'health'));
  });

  it('reports a server that says it is unhealthy as BackendUnhealthy without listing', async () => {
    const h = new Host(accepted());
    h.api.unhealthy = true;
    const st = statuses(
      await reconcileWithEffects({ key: '@params:microvm', object: undefined, state: h.state, now: NOW }, h.deps),
    )[0] as OpenSandboxParameters['status'];
    assert.deepEqual([st?.conditions?.[0]?.status, st?.conditions?.[0]?.reason], ['False', 'BackendUnhealthy']);
    assert.match(st?.conditions?.[0]?.message ?? '', /HTTP 503/);
    assert.deepEqual(h.api.calls, ['health']);
  });
});
