import assert from 'node:assert/strict';
import type { Operation } from '../../lib/fn/types.ts';
import { SANDBOX_FINALIZER, type Job, type JobStatus } from '../../lib/jobclass/api.ts';
import {
  FakeState,
  NOW,
  R,
  T0,
  X,
  events,
  job,
  jobClass,
  osParams,
  secret,
  statuses,
} from '../../lib/jobclass/testing.ts';
import { executionAgeMs, pollDelayMs } from './poll.ts';
import {
  CREATE_WINDOW_MS,
  MAX_CREATE_MS,
  POLL_MS,
  REISSUE_MS,
  decide,
  type Action,
  type Decision,
  type Observation,
  type SandboxView,
} from './core.ts';
import { afterAction } from './outcome.ts';
import { PROBE_INTERVAL_MS, PROBE_REFRESH_MS, PROBE_RETRY_MS, probeOps } from './probe.ts';

const API_KEY = 'super-secret-api-key';
const POLICY = { insecureHosts: [] as string[] };
const ago = (ms: number): string => new Date(NOW.getTime() - ms).toISOString();
const status = (ops: Operation[]): JobStatus => statuses(ops)[0] as JobStatus;
const cond = (ops: Operation[], type: string): { status: string; reason: string; message: string } | undefined =>
  status(ops)?.conditions?.find((c) => c.type === type);
const requeues = (ops: Operation[]): number[] =>
  ops.filter((o): o is Extract<Operation, { op: 'requeue' }> => o.op === 'requeue').map((o) => o.afterMs);

function world(): FakeState {
  return new FakeState([
    [X.jobClasses, jobClass('microvm', { controller: 'opensandbox' })],
    [X.openSandboxParameters, osParams('microvm', { poolRef: 'microvm', allowSecretEnv: true, allowImageAuth: true })],
    [R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': API_KEY })],
  ]);
}

function osJob(
  spec: Partial<Job['spec']> = {},
  extra: Partial<JobStatus> = {},
  meta: Partial<Job['metadata']> = {},
): Job {
  const j = job('train', spec);
  return {
    ...j,
    metadata: { ...j.metadata, finalizers: [SANDBOX_FINALIZER], ...meta },
    status: {
      phase: 'Pending',
      conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 }],
      resolvedJobClass: {
        name: 'microvm',
        uid: 'uid-microvm',
        controllerName: 'execution.ayatori.ddupan.top/opensandbox',
        parametersRef: {
          group: 'execution.ayatori.ddupan.top',
          kind: 'OpenSandboxExecutionParameters',
          name: 'microvm',
          uid: 'puid-microvm',
        },
      },
      effectiveResources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } },
      ...extra,
    },
  };
}

const intent = (ageMs: number, outcome: 'Pending' | 'Rejected' = 'Pending', attempt = 1): Partial<JobStatus> => ({
  execution: {
    controllerName: 'execution.ayatori.ddupan.top/opensandbox',
    kind: 'Sandbox',
    createIntent: { attempt, requestedAt: ago(ageMs), outcome },
  },
});
const recorded = (id = 'sb-1', more: Record<string, string> = {}): Partial<JobStatus> => ({
  startTime: ago(60_000),
  execution: { controllerName: 'execution.ayatori.ddupan.top/opensandbox', kind: 'Sandbox', sandboxID: id, ...more },
  conditions: [
    { type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 },
    { type: 'Scheduled', status: 'True', reason: 'SandboxCreated', message: '', lastTransitionTime: T0 },
  ],
});
const sb = (id: string, state: string, o: Partial<SandboxView> = {}): SandboxView => ({
  id,
  state,
  createdAt: ago(30_000),
  ...o,
});
const listed = (...s: SandboxView[]): Observation => ({ kind: 'listed', sandboxes: s });
const run = (j: Job | undefined, obs?: Observation, state = world()): Decision =>
  decide({ job: j, state, now: NOW, policy: POLICY, ...(obs ? { observation: obs } : {}) });
const actionOf = <T extends Action['type']>(d: Decision, type: T): Extract<Action, { type: T }> => {
  assert.equal(d.action?.type, type);
  return d.action as Extract<Action, { type: T }>;
};

describe('jobclass-opensandbox core: gate and connection', () => {
  it('ignores Jobs that are not accepted OpenSandbox Jobs', () => {
    assert.deepEqual(run(job('x')), { ops: [] });
    const k8s = osJob();
    k8s.status!.resolvedJobClass!.controllerName = 'execution.ayatori.ddupan.top/kubernetes';
    assert.deepEqual(run(k8s), { ops: [] });
  });

  it('adds the cleanup finalizer before any backend call and removes it once finished', () => {
    const d = run(osJob({}, {}, { finalizers: [] }));
    assert.deepEqual([d.action, d.ops.map((o) => o.op)], [undefined, ['patch']]);
    const done = osJob(
      {},
      {
        conditions: [
          { type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 },
          { type: 'Succeeded', status: 'True', reason: 'Completed', message: '', lastTransitionTime: T0 },
        ],
      },
    );
    assert.deepEqual((run(done).ops[0] as { patch: unknown }).patch, {
      metadata: { resourceVersion: '10', finalizers: [] },
    });
  });

  it('releases a deleted Job that never had a create intent without calling the backend', () => {
    const d = run(osJob({}, {}, { deletionTimestamp: T0 }), undefined, new FakeState());
    assert.deepEqual([d.action, d.ops.map((o) => o.op)], [undefined, ['patch']]);
  });

  it('asks to observe with the API key from the Secret, never putting it into operations', () => {
    const d = run(osJob());
    const a = actionOf(d, 'observe');
    assert.deepEqual([a.connection.apiKey, a.connection.endpoint], [API_KEY, 'https://opensandbox.example.internal']);
    assert.deepEqual(d.ops, []);
  });

  it('waits (Scheduled=False) before an execution exists and reports ResultUnknown after, when the backend is unusable', () => {
    const noParams = world().remove(X.openSandboxParameters, undefined, 'microvm');
    const before = run(osJob(), undefined, noParams);
    assert.deepEqual([before.action, cond(before.ops, 'Scheduled')?.reason], [undefined, 'ParametersNotFound']);
    const after = run(osJob({}, recorded()), undefined, noParams);
    assert.deepEqual(
      [cond(after.ops, 'ResultUnknown')?.reason, status(after.ops).phase],
      ['ParametersNotFound', 'Unknown'],
    );
    assert.equal(
      cond(
        run(osJob(), undefined, world().put(X.openSandboxParameters, osParams('microvm', { uid: 'new' }))).ops,
        'Scheduled',
      )?.reason,
      'ParametersReplaced',
    );
    assert.equal(
      cond(run(osJob(), undefined, world().remove(R.secrets, 'ayatori-system', 'opensandbox-api')).ops, 'Scheduled')
        ?.reason,
      'ApiKeySecretNotFound',
    );
    assert.equal(
      cond(
        run(
          osJob(),
          undefined,
          world().put(X.openSandboxParameters, osParams('microvm', { endpoint: 'http://10.0.0.1' })),
        ).ops,
        'Scheduled',
      )?.reason,
      'InsecureEndpoint',
    );
  });

  it('maps a failed list to BackendAuthenticationFailed / BackendUnreachable', () => {
    const unauth = run(osJob(), { kind: 'failed', error: { kind: 'unauthorized', message: 'HTTP 401' } });
    assert.equal(cond(unauth.ops, 'Scheduled')?.reason, 'BackendAuthenticationFailed');
    const down = run(osJob({}, recorded()), { kind: 'failed', error: { kind: 'server', message: 'HTTP 500' } });
    assert.equal(cond(down.ops, 'ResultUnknown')?.reason, 'BackendUnreachable');
    const deleting = run(osJob({}, recorded(), { deletionTimestamp: T0 }), {
      kind: 'failed',
      error: { kind: 'network', message: 'ECONNREFUSED' },
    });
    assert.deepEqual(
      events(deleting.ops).map((e) => e.reason),
      ['CleanupBlocked'],
    );
    assert.ok(!deleting.ops.some((o) => o.op === 'patch'), 'the finalizer stays');
  });

  it('a 429 on the list changes nothing (no ResultUnknown, no Scheduled flip) and retries after Retry-After', () => {
    const limited: Observation = {
      kind: 'failed',
      error: { kind: 'rate-limited', message: 'HTTP 429', retryAfterMs: 7000 },
    };
    for (const j of [osJob({}, recorded()), osJob(), osJob({}, recorded(), { deletionTimestamp: T0 })])
      assert.deepEqual(run(j, limited), { ops: [{ op: 'requeue', afterMs: 7000 }] });
  });
});

describe('jobclass-opensandbox core: exactly-once create', () => {
  it('records a create intent first and only then creates, within the window', () => {
    const first = run(osJob(), listed());
    assert.equal(first.action, undefined);
    assert.deepEqual(status(first.ops).execution?.createIntent, {
      attempt: 1,
      requestedAt: NOW.toISOString(),
      outcome: 'Pending',
    });
    assert.deepEqual([cond(first.ops, 'Scheduled')?.reason, requeues(first.ops)], ['CreatingSandbox', [1]]);
    const second = run(osJob({ activeDeadlineSeconds: 30 }, intent(1000)), listed());
    const req = actionOf(second, 'create').request;
    assert.deepEqual(req, {
      image: { uri: 'busybox:1.36' },
      entrypoint: ['sh', '-c', 'echo hi'],
      resourceLimits: { cpu: '2', memory: '2Gi' },
      timeout: 60,
      metadata: {
        'execution.ayatori.ddupan.top/job-uid': 'juid-train',
        'execution.ayatori.ddupan.top/job-namespace': 'team-a',
        'execution.ayatori.ddupan.top/job-name': 'train',
        'execution.ayatori.ddupan.top/jobclass-uid': 'uid-microvm',
      },
      extensions: { poolRef: 'microvm' },
    });
  });

  it('never creates while an earlier create may still land, then starts a new attempt', () => {
    const waiting = run(osJob({}, intent(CREATE_WINDOW_MS + 1)), listed());
    assert.deepEqual([waiting.action, cond(waiting.ops, 'Scheduled')?.reason], [undefined, 'CreateOutcomeUnknown']);
    const fresh = run(osJob({}, intent(CREATE_WINDOW_MS + MAX_CREATE_MS)), listed());
    assert.deepEqual([fresh.action, status(fresh.ops).execution?.createIntent?.attempt], [undefined, 2]);
    const afterReject = run(osJob({}, intent(1, 'Rejected', 3)), listed());
    assert.equal(status(afterReject.ops).execution?.createIntent?.attempt, 4);
  });

  it('adopts a sandbox created before a crash instead of creating again; the oldest wins, duplicates are deleted', () => {
    const one = run(osJob({}, intent(1000)), listed(sb('sb-1', 'Running')));
    assert.deepEqual(
      [one.action, status(one.ops).execution?.sandboxID, cond(one.ops, 'Scheduled')?.status, status(one.ops).phase],
      [undefined, 'sb-1', 'True', 'Running'],
    );
    const two = run(
      osJob(),
      listed(sb('young', 'Running', { createdAt: ago(1000) }), sb('old', 'Pending', { createdAt: ago(9000) })),
    );
    assert.equal(status(two.ops).execution?.sandboxID, 'old');
    assert.deepEqual(actionOf(two, 'delete').ids, ['young']);
    const dup = run(osJob({}, recorded('sb-1')), listed(sb('sb-1', 'Running'), sb('sb-2', 'Running')));
    assert.deepEqual([actionOf(dup, 'delete').why, actionOf(dup, 'delete').ids], ['duplicate', ['sb-2']]);
  });

  it('does not create while the class is not Ready (and rejects a fresh intent), nor for a recreated class', () => {
    const notReady = world().put(X.jobClasses, jobClass('microvm', { controller: 'opensandbox', ready: false }));
    const d = run(osJob(), listed(), notReady);
    assert.deepEqual(
      [d.action, cond(d.ops, 'Scheduled')?.reason, status(d.ops).execution],
      [undefined, 'JobClassNotReady', undefined],
    );
    const fresh = run(osJob({}, intent(1000)), listed(), notReady);
    assert.deepEqual([fresh.action, status(fresh.ops).execution?.createIntent?.outcome], [undefined, 'Rejected']);
    // An earlier send of the intent had no definite answer: it may still land, so the intent stays Pending.
    const tried = osJob({}, intent(6000));
    tried.status!.conditions = [
      ...tried.status!.conditions!,
      { type: 'Scheduled', status: 'False', reason: 'CreateOutcomeUnknown', message: '', lastTransitionTime: T0 },
    ];
    const held = run(tried, listed(), notReady);
    assert.deepEqual(
      [held.action, cond(held.ops, 'Scheduled')?.reason, status(held.ops).execution?.createIntent?.outcome],
      [undefined, 'JobClassNotReady', 'Pending'],
    );
    const replaced = world().put(X.jobClasses, jobClass('microvm', { controller: 'opensandbox', uid: 'new' }));
    assert.equal(cond(run(osJob(), listed(), replaced).ops, 'Scheduled')?.reason, 'JobClassReplaced');
  });

  it('sends Secret env and registry credentials only when the parameters allow them', () => {
    const cfg = JSON.stringify({ auths: { 'docker.io': { username: 'u', password: 'p' } } });
    const state = world()
      .put(R.secrets, secret('team-a', 'db', { pw: 'hunter2' }))
      .put(R.secrets, secret('team-a', 'regcred', { '.dockerconfigjson': cfg }, 'kubernetes.io/dockerconfigjson'));
    const j = osJob(
      {
        env: [
          { name: 'PW', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } },
          { name: 'A', value: '1' },
        ],
        imagePullSecret: { name: 'regcred' },
      },
      intent(1000),
    );
    const req = actionOf(run(j, listed(), state), 'create').request;
    assert.deepEqual(
      [req.env, req.image],
      [
        { PW: 'hunter2', A: '1' },
        { uri: 'busybox:1.36', auth: { username: 'u', password: 'p' } },
      ],
    );
    state.put(X.openSandboxParameters, osParams('microvm'));
    const denied = run(j, listed(), state);
    assert.deepEqual([denied.action, cond(denied.ops, 'Scheduled')?.reason], [undefined, 'SecretEnvNotAllowed']);
    assert.ok(!JSON.stringify(denied.ops).includes('hunter2'));
  });
});

describe('jobclass-opensandbox core: observe, cancel, deadline, delete', () => {
  it('maps sandbox states to phases and polls', () => {
    const running = run(osJob({}, recorded()), listed(sb('sb-1', 'Running')));
    const age = executionAgeMs(status(running.ops).startTime, NOW);
    assert.deepEqual(
      [status(running.ops).phase, requeues(running.ops)],
      ['Running', [pollDelayMs(age)]],
      'polled on the adaptive schedule',
    );
    const pending = run(osJob({}, recorded()), listed(sb('sb-1', 'Pending')));
    assert.equal(status(pending.ops).phase, 'Scheduled');
    const steady = run({ ...osJob({}, recorded()), status: status(pending.ops) }, listed(sb('sb-1', 'Pending')));
    assert.deepEqual(
      steady.ops,
      [{ op: 'requeue', afterMs: pollDelayMs(age) }],
      'a steady state writes nothing and keeps polling',
    );
    const old = run(
      { ...osJob({}, recorded()), status: { ...status(pending.ops), startTime: '2026-09-17T09:00:00Z' } },
      listed(sb('sb-1', 'Running')),
    );
    assert.deepEqual(requeues(old.ops), [POLL_MS], 'an hour-old sandbox is polled at the cap');
  });

  it('maps finished sandboxes: Terminated -> Succeeded, Failed -> delete then Failed, ttl_expiry -> DeadlineExceeded, foreign delete -> ResultUnknown', () => {
    const ok = run(osJob({}, recorded()), listed(sb('sb-1', 'Terminated', { reason: 'completed' })));
    assert.deepEqual([status(ok.ops).phase, cond(ok.ops, 'Succeeded')?.reason], ['Succeeded', 'Completed']);
    const failed = run(osJob({}, recorded()), listed(sb('sb-1', 'Failed', { reason: 'process_exited' })));
    const del = actionOf(failed, 'delete');
    assert.equal(del.why, 'failed');
    const after = afterAction(osJob({}, recorded()), del, { ok: true }, NOW);
    assert.deepEqual([status(after).phase, cond(after, 'Failed')?.reason], ['Failed', 'SandboxFailed']);
    assert.equal(
      cond(run(osJob({}, recorded()), listed(sb('sb-1', 'Terminated', { reason: 'ttl_expiry' }))).ops, 'Failed')
        ?.reason,
      'DeadlineExceeded',
    );
    const foreign = run(osJob({}, recorded()), listed(sb('sb-1', 'Terminated', { reason: 'user_delete' })));
    assert.deepEqual(
      [cond(foreign.ops, 'ResultUnknown')?.reason, status(foreign.ops).phase],
      ['SandboxDeletedExternally', 'Unknown'],
    );
  });

  it('reports ResultUnknown for a recorded sandbox that is gone and never re-creates it; recovers when it is seen again', () => {
    const gone = run(osJob({}, recorded()), listed());
    assert.deepEqual([gone.action, cond(gone.ops, 'ResultUnknown')?.reason], [undefined, 'SandboxNotFound']);
    const unknown = osJob(
      {},
      {
        ...recorded(),
        conditions: [
          ...recorded().conditions!,
          { type: 'ResultUnknown', status: 'True', reason: 'SandboxNotFound', message: '', lastTransitionTime: T0 },
        ],
      },
    );
    const back = run(unknown, listed(sb('sb-1', 'Running')));
    assert.deepEqual([cond(back.ops, 'ResultUnknown')?.status, status(back.ops).phase], ['False', 'Running']);
  });

  it('cancels by deleting the sandbox, even when the class is not Ready, and finishes as Cancelled', () => {
    const notReady = world().put(X.jobClasses, jobClass('microvm', { controller: 'opensandbox', ready: false }));
    const j = osJob({ cancelRequested: true }, recorded());
    const d = run(j, listed(sb('sb-1', 'Running')), notReady);
    const del = actionOf(d, 'delete');
    assert.deepEqual([del.why, del.ids], ['cancel', ['sb-1']]);
    const issued = afterAction(j, del, { ok: true }, NOW);
    assert.equal(status(issued).execution?.cancelIssuedAt, NOW.toISOString());
    const j2 = osJob({ cancelRequested: true }, recorded('sb-1', { cancelIssuedAt: ago(1000) }));
    assert.deepEqual(run(j2, listed(sb('sb-1', 'Stopping')), notReady), { ops: [{ op: 'requeue', afterMs: 2000 }] });
    const again = osJob({ cancelRequested: true }, recorded('sb-1', { cancelIssuedAt: ago(REISSUE_MS) }));
    assert.equal(
      actionOf(run(again, listed(sb('sb-1', 'Running')), notReady), 'delete').why,
      'cancel',
      're-issued after REISSUE_MS',
    );
    const done = run(j2, listed(sb('sb-1', 'Terminated', { reason: 'user_delete' })), notReady);
    assert.deepEqual([status(done.ops).phase, cond(done.ops, 'Failed')?.reason], ['Failed', 'Cancelled']);
    assert.equal(
      cond(run(j2, listed(), notReady).ops, 'Failed')?.reason,
      'Cancelled',
      'a deleted sandbox may also vanish',
    );
  });

  it('cancels before any sandbox: waits while a create may land, else finishes without running', () => {
    assert.equal(cond(run(osJob({ cancelRequested: true }), listed()).ops, 'Failed')?.reason, 'Cancelled');
    const inFlight = run(osJob({ cancelRequested: true }, intent(1000)), listed());
    assert.deepEqual([inFlight.action, cond(inFlight.ops, 'Failed')], [undefined, undefined]);
  });

  it('stops the sandbox at activeDeadlineSeconds and reports DeadlineExceeded', () => {
    const j = osJob({ activeDeadlineSeconds: 60 }, recorded());
    const del = actionOf(run(j, listed(sb('sb-1', 'Running'))), 'delete');
    assert.equal(del.why, 'deadline');
    const j2 = osJob({ activeDeadlineSeconds: 60 }, recorded('sb-1', { cancelIssuedAt: ago(500) }));
    assert.equal(
      cond(run(j2, listed(sb('sb-1', 'Terminated', { reason: 'user_delete' }))).ops, 'Failed')?.reason,
      'DeadlineExceeded',
    );
  });

  it('deletes every live sandbox of a deleted Job before releasing it', () => {
    const j = osJob({}, recorded(), { deletionTimestamp: T0 });
    const d = run(j, listed(sb('sb-1', 'Running'), sb('sb-2', 'Terminated')));
    assert.deepEqual([actionOf(d, 'delete').why, actionOf(d, 'delete').ids], ['cleanup', ['sb-1']]);
    assert.deepEqual(run(j, listed(sb('sb-1', 'Stopping'))).ops, [{ op: 'requeue', afterMs: 2000 }]);
    assert.equal(run(j, listed(sb('sb-1', 'Terminated'))).ops[0]?.op, 'patch');
    const pending = osJob({}, intent(1000), { deletionTimestamp: T0 });
    assert.deepEqual(
      requeues(run(pending, listed()).ops),
      [CREATE_WINDOW_MS + MAX_CREATE_MS - 1000],
      'waits out an in-flight create',
    );
    assert.equal(
      run(osJob({}, intent(CREATE_WINDOW_MS + MAX_CREATE_MS), { deletionTimestamp: T0 }), listed()).ops[0]?.op,
      'patch',
    );
  });
});

describe('jobclass-opensandbox core: the recorded backend wins over an endpoint change', () => {
  const OLD = 'https://old-sandbox.example.internal';
  const OLD_KEY_REF = { namespace: 'ayatori-system', name: 'old-api', key: 'api-key' };
  /** The parameters now name another backend and another key Secret; the old Secret still exists. */
  function moved(): FakeState {
    const st = world();
    const p = osParams('microvm', { poolRef: 'microvm', endpoint: 'https://new-sandbox.example.internal' });
    p.spec.apiKeySecretRef = { namespace: 'ayatori-system', name: 'new-api', key: 'api-key' };
    st.put(X.openSandboxParameters, p);
    st.put(R.secrets, secret('ayatori-system', 'old-api', { 'api-key': 'old-key' }));
    st.put(R.secrets, secret('ayatori-system', 'new-api', { 'api-key': 'new-key' }));
    return st;
  }
  const at = { endpoint: OLD, apiKeySecretRef: OLD_KEY_REF };
  const backend = (a: { connection: { endpoint: string; apiKey: string } }): string[] => [
    a.connection.endpoint,
    a.connection.apiKey,
  ];

  it('observes, cancels and deletes a recorded sandbox on its recorded endpoint with its recorded key', () => {
    const running = osJob({}, recorded('sb-1', {}));
    running.status!.execution = { ...running.status!.execution!, ...at };
    assert.deepEqual(backend(actionOf(run(running, undefined, moved()), 'observe')), [OLD, 'old-key']);
    const cancelled = { ...running, spec: { ...running.spec, cancelRequested: true } };
    const del = actionOf(run(cancelled, listed(sb('sb-1', 'Running')), moved()), 'delete');
    assert.deepEqual([...backend(del), del.ids], [OLD, 'old-key', ['sb-1']]);
    const deleting = { ...running, metadata: { ...running.metadata, deletionTimestamp: T0 } };
    const cleanup = actionOf(run(deleting, listed(sb('sb-1', 'Running')), moved()), 'delete');
    assert.deepEqual([...backend(cleanup), cleanup.why], [OLD, 'old-key', 'cleanup']);
  });

  it('sends a pending create to the backend of its intent, never to the new endpoint', () => {
    const pending = osJob({ command: ['true'] }, intent(1000));
    pending.status!.execution = { ...pending.status!.execution!, ...at };
    assert.deepEqual(backend(actionOf(run(pending, undefined, moved()), 'observe')), [OLD, 'old-key']);
    const create = actionOf(run(pending, listed(), moved()), 'create');
    assert.deepEqual(backend(create), [OLD, 'old-key']);
    const found = run(pending, listed(sb('sb-9', 'Running')), moved());
    assert.deepEqual(status(found.ops).execution, {
      ...pending.status!.execution,
      sandboxID: 'sb-9',
      endpoint: OLD,
      apiKeySecretRef: OLD_KEY_REF,
    });
    const created = afterAction(pending, create, { ok: true, created: sb('sb-2', 'Pending') }, NOW);
    assert.deepEqual(
      [status(created).execution?.endpoint, status(created).execution?.apiKeySecretRef],
      [OLD, OLD_KEY_REF],
    );
  });

  it('starts a new attempt on the current backend only after the recorded one was listed empty past the intent', () => {
    const expired = osJob({ command: ['true'] }, intent(CREATE_WINDOW_MS + MAX_CREATE_MS + 1));
    expired.status!.execution = { ...expired.status!.execution!, ...at };
    assert.deepEqual(backend(actionOf(run(expired, undefined, moved()), 'observe')), [OLD, 'old-key']);
    const d = run(expired, listed(), moved());
    assert.equal(d.action, undefined);
    assert.deepEqual(
      [status(d.ops).execution?.endpoint, status(d.ops).execution?.apiKeySecretRef?.name],
      ['https://new-sandbox.example.internal', 'new-api'],
    );
    const rejected = osJob({ command: ['true'] }, intent(1000, 'Rejected'));
    rejected.status!.execution = { ...rejected.status!.execution!, ...at };
    assert.deepEqual(backend(actionOf(run(rejected, undefined, moved()), 'observe')), [
      'https://new-sandbox.example.internal',
      'new-key',
    ]);
  });

  it('uses the current Secret on an unchanged endpoint and fails closed without a recorded Secret elsewhere', () => {
    const running = osJob({}, recorded('sb-1', {}));
    running.status!.execution = {
      ...running.status!.execution!,
      endpoint: 'https://opensandbox.example.internal/',
      apiKeySecretRef: OLD_KEY_REF,
    };
    assert.deepEqual(backend(actionOf(run(running), 'observe')), ['https://opensandbox.example.internal/', API_KEY]);
    const legacy = osJob({}, recorded('sb-1', { endpoint: OLD }));
    const d = run(legacy, undefined, moved());
    assert.equal(d.action, undefined);
    assert.deepEqual([cond(d.ops, 'ResultUnknown')?.reason, status(d.ops).phase], ['ApiKeySecretNotFound', 'Unknown']);
    assert.ok(!JSON.stringify(d.ops).includes('new-key'));
  });
});

describe('jobclass-opensandbox outcome of actions', () => {
  const createAction = (): Extract<Action, { type: 'create' }> =>
    actionOf(run(osJob({}, intent(1000)), listed()), 'create');
  const j = osJob({}, intent(1000));

  it('records the created sandbox', () => {
    const ops = afterAction(
      j,
      createAction(),
      { ok: true, created: { id: 'sb-9', state: 'Running', createdAt: NOW.toISOString() } },
      NOW,
    );
    assert.deepEqual(
      [status(ops).execution?.sandboxID, status(ops).execution?.endpoint, status(ops).startTime, status(ops).phase],
      ['sb-9', 'https://opensandbox.example.internal', NOW.toISOString(), 'Running'],
    );
  });

  it('treats HTTP 429 as PoolExhausted, retried after Retry-After', () => {
    const ops = afterAction(
      j,
      createAction(),
      {
        ok: false,
        error: { kind: 'rate-limited', message: 'HTTP 429 KUBERNETES::POOL_CAPACITY_EXHAUSTED', retryAfterMs: 3000 },
      },
      NOW,
    );
    assert.deepEqual(
      [cond(ops, 'Scheduled')?.reason, status(ops).execution?.createIntent?.outcome, requeues(ops)],
      ['PoolExhausted', 'Rejected', [3000]],
    );
    assert.match(cond(ops, 'Scheduled')?.message ?? '', /pool microvm has no free capacity/);
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [['Warning', 'PoolExhausted']],
    );
  });

  it('keeps the intent Pending when the outcome is unknown, fails on 400, waits on 401', () => {
    const unknown = afterAction(
      j,
      createAction(),
      { ok: false, error: { kind: 'network', message: 'socket hang up', outcomeUnknown: true } },
      NOW,
    );
    assert.deepEqual(
      [cond(unknown, 'Scheduled')?.reason, status(unknown).execution?.createIntent?.outcome],
      ['CreateOutcomeUnknown', 'Pending'],
    );
    const bad = afterAction(j, createAction(), { ok: false, error: { kind: 'invalid', message: 'HTTP 400' } }, NOW);
    assert.deepEqual([status(bad).phase, cond(bad, 'Failed')?.reason], ['Failed', 'BackendRejected']);
    const auth = afterAction(
      j,
      createAction(),
      { ok: false, error: { kind: 'unauthorized', message: 'HTTP 401' } },
      NOW,
    );
    assert.equal(cond(auth, 'Scheduled')?.reason, 'BackendAuthenticationFailed');
  });

  it('reports a failed cleanup delete as CleanupBlocked and duplicates as a Warning', () => {
    const del = {
      type: 'delete' as const,
      connection: createAction().connection,
      ids: ['sb-1'],
      why: 'cleanup' as const,
    };
    assert.deepEqual(
      events(afterAction(j, del, { ok: false, error: { kind: 'server', message: 'HTTP 500' } }, NOW)).map(
        (e) => e.reason,
      ),
      ['CleanupBlocked'],
    );
    assert.deepEqual(
      events(afterAction(j, { ...del, why: 'duplicate' }, { ok: true }, NOW)).map((e) => e.reason),
      ['DuplicateSandboxDeleted'],
    );
  });

  it('never writes the API key into any operation', () => {
    const all = [createAction()].flatMap((a) => [
      ...afterAction(j, a, { ok: false, error: { kind: 'unauthorized', message: 'HTTP 401' } }, NOW),
      ...afterAction(j, a, { ok: true, created: { id: 'x', state: 'Running', createdAt: T0 } }, NOW),
    ]);
    assert.ok(!JSON.stringify(all).includes(API_KEY));
  });
});

describe('jobclass-opensandbox probe', () => {
  const p = osParams('microvm');
  it('records BackendReachable with the probed endpoint and Secret resourceVersion', () => {
    const ops = probeOps(p, { ok: true }, '7', NOW);
    const st = statuses(ops)[0] as { conditions: { reason: string }[]; probe: unknown };
    assert.deepEqual(
      [st.conditions[0]?.reason, st.probe],
      ['Reachable', { endpoint: p.spec.endpoint, apiKeySecretResourceVersion: '7', time: NOW.toISOString() }],
    );
    assert.deepEqual(requeues(ops), [PROBE_INTERVAL_MS]);
    const fresh = { ...p, status: st } as typeof p;
    assert.deepEqual(
      probeOps(fresh, { ok: true }, '7', new Date(NOW.getTime() + 1000)),
      [{ op: 'requeue', afterMs: PROBE_INTERVAL_MS }],
      'unchanged and fresh: no write',
    );
    assert.equal(
      statuses(probeOps(fresh, { ok: true }, '7', new Date(NOW.getTime() + PROBE_REFRESH_MS))).length,
      1,
      'refreshed',
    );
  });

  it('a 429 keeps the verdict (Ready does not flip) and keeps it fresh; without a verdict nothing is recorded', () => {
    const limited = { ok: false as const, error: { kind: 'rate-limited', message: 'HTTP 429', retryAfterMs: 5000 } };
    const st = statuses(probeOps(p, { ok: true }, '7', NOW))[0] as NonNullable<typeof p.status>;
    const later = new Date(NOW.getTime() + PROBE_REFRESH_MS + 1);
    const ops = probeOps({ ...p, status: st }, limited, '8', later);
    const after = statuses(ops)[0] as NonNullable<typeof p.status>;
    assert.deepEqual(after.conditions, st.conditions, 'BackendReachable unchanged, no transition');
    assert.deepEqual(after.probe, { ...st.probe, time: later.toISOString() }, 'same Secret version, fresh time');
    assert.deepEqual(events(ops), []);
    assert.deepEqual(probeOps(p, limited, '7', NOW), [{ op: 'requeue', afterMs: PROBE_RETRY_MS }]);
    const moved = { ...p, spec: { ...p.spec, endpoint: 'https://elsewhere.example.internal' }, status: st };
    assert.deepEqual(statuses(probeOps(moved, limited, '7', later)), [], 'a verdict of another endpoint is not kept');
  });

  it('records failures with a shorter retry', () => {
    const ops = probeOps(p, { ok: false, error: { kind: 'unauthorized', message: 'HTTP 401' } }, '7', NOW);
    assert.deepEqual(
      [(statuses(ops)[0] as { conditions: { reason: string }[] }).conditions[0]?.reason, requeues(ops)],
      ['BackendAuthenticationFailed', [PROBE_RETRY_MS]],
    );
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [['Warning', 'BackendAuthenticationFailed']],
    );
  });
});
