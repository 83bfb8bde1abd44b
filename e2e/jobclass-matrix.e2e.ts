/**
 * The JobClass test matrix (seed 001 "测试矩阵") on the real cluster, row by row, where
 * jobclass.e2e.ts does not already show it: default class precedence, zero and several
 * defaults, allowedNamespaces (admission, acceptance, label change after acceptance),
 * unsupported controllers and parameters kinds, parameters appearing late or recreated,
 * resource policy at the CRD and admission, class policy edits, RuntimeClass deletion
 * (Ready=False gates only new executions), class deletion protection, same-name
 * recreation, and the OpenSandbox Secret env / image auth allowances. Real API server,
 * admission webhooks, functions, job controller and node agent; the OpenSandbox specs use
 * the local spec-validating OpenSandbox server. Cluster-scoped objects get unique names.
 */
import assert from 'node:assert/strict';
import { isApiError } from '../lib/kube/errors.ts';
import { admin, deleteNamespace, eventually, newNamespace } from './helpers.ts';
import {
  API_VERSION,
  DEFAULT_CLASS,
  G,
  NAMESPACE_DEFAULT,
  OPENSANDBOX,
  X,
  classReady,
  classUntil,
  cleanup,
  cond,
  eventsOf,
  eventually404,
  executionsOf,
  forceRemove,
  gate,
  getClass,
  getJob,
  jobclassMetrics,
  job,
  kubernetesClass,
  kubernetesParams,
  readyKubernetesClass,
  serviceAccount,
  uniq,
  until,
  untilReason,
  type Job,
} from './jobclass-fixtures.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from './opensandbox-server/server.ts';

const CLASSES = `${X}/jobclasses`;
const K_PARAMS = `${X}/kubernetesexecutionparameters`;
const OS_PARAMS = `${X}/opensandboxexecutionparameters`;
const rejectedWith =
  (code: number, re: RegExp) =>
  (e: unknown): boolean =>
    isApiError(e, code) && re.test(e.message);
const succeeded = (ns: string, name: string): Promise<Job> =>
  until(ns, name, (x) => x.status?.phase === 'Succeeded', 'Succeeded');
const running = (ns: string, name: string): Promise<Job> =>
  until(ns, name, (x) => x.status?.phase === 'Running', 'Running');
const setAnnotation = (path: string, key: string, value: string | null): Promise<unknown> =>
  admin().patch(path, { metadata: { annotations: { [key]: value } } });
const setLabel = (ns: string, key: string, value: string | null): Promise<unknown> =>
  admin().patch(`/api/v1/namespaces/${ns}`, { metadata: { labels: { [key]: value } } });
const TRUE = ['true'];

describe('JobClass matrix: default class resolution', function () {
  const p = `e2e-def-${uniq}`;
  const owned: string[] = [];
  const namespaces: string[] = [];
  const ns = async (prefix: string, annotations: Record<string, string> = {}): Promise<string> => {
    const n = await newNamespace(prefix);
    namespaces.push(n);
    if (Object.keys(annotations).length) await admin().patch(`/api/v1/namespaces/${n}`, { metadata: { annotations } });
    await serviceAccount(n);
    return n;
  };
  const cls = async (name: string, isDefault: boolean): Promise<string> => {
    owned.unshift(`${CLASSES}/${name}`);
    await admin().create(
      CLASSES,
      kubernetesClass(name, `${p}-params`, isDefault ? { metadata: { annotations: { [DEFAULT_CLASS]: 'true' } } } : {}),
    );
    return (await classReady(name)).metadata.uid ?? '';
  };
  before(async () => {
    owned.push(`${K_PARAMS}/${p}-params`);
    await admin().create(K_PARAMS, kubernetesParams(`${p}-params`));
  });
  after(async () => {
    for (const n of namespaces) await deleteNamespace(n);
    await cleanup(owned);
  });

  it('jobclass: no default keeps Accepted=False/NoDefaultJobClass; two defaults give AmbiguousDefaultJobClass and Warning Events', async () => {
    const n = await ns('jcnodef');
    await job(n, 'none', { image: 'bash:5', command: TRUE });
    const none = await untilReason(n, 'none', 'Accepted', 'NoDefaultJobClass', 'False');
    assert.match(
      cond(none, 'Accepted')?.message ?? '',
      /no JobClass is annotated execution\.ayatori\.ddupan\.top\/is-default-job-class/,
    );
    assert.equal(none.status?.resolvedJobClass, undefined, 'nothing is frozen without a class');

    const d1 = `${p}-d1`;
    const d2 = `${p}-d2`;
    const d1uid = await cls(d1, true);
    try {
      // The waiting Job is woken by the new default and accepted with it.
      const got = await untilReason(n, 'none', 'Accepted', 'Accepted', 'True');
      assert.equal(got.status?.resolvedJobClass?.name, d1);
      assert.equal(got.status?.resolvedJobClass?.uid, d1uid);
      // Nothing about d1 changes from here on: its platform alert must come from d2 appearing.
      await succeeded(n, 'none');

      const d2uid = await cls(d2, true);
      await job(n, 'ambiguous', { image: 'bash:5', command: TRUE });
      const amb = await untilReason(n, 'ambiguous', 'Accepted', 'AmbiguousDefaultJobClass', 'False');
      assert.match(
        cond(amb, 'Accepted')?.message ?? '',
        new RegExp(`several JobClasses are global defaults \\(${d1}, ${d2}\\).*no newest-wins`),
      );
      assert.equal(amb.status?.resolvedJobClass, undefined, 'no class is picked, not even the newest');
      for (const uid of [d1uid, d2uid]) {
        const w = await eventually('the AmbiguousDefaultJobClass platform alert', async () =>
          (await eventsOf(uid)).find((e) => e.reason === 'AmbiguousDefaultJobClass'),
        );
        assert.equal(w.type, 'Warning');
        assert.match(w.message, new RegExp(`JobClasses ${d1}, ${d2} are all annotated as the global default`));
      }
      // The alert is also a metric, held for as long as the ambiguity lasts.
      await eventually('kruntimes_jobclass_ambiguous_default 1', async () =>
        (await jobclassMetrics()).includes('kruntimes_jobclass_ambiguous_default 1'),
      );
      assert.ok((await jobclassMetrics()).includes('kruntimes_jobclass_global_defaults 2'));
      // One default again: the waiting Job resolves to it.
      await setAnnotation(`${CLASSES}/${d2}`, DEFAULT_CLASS, null);
      const resolved = await untilReason(n, 'ambiguous', 'Accepted', 'Accepted', 'True');
      assert.equal(resolved.status?.resolvedJobClass?.name, d1);
      await eventually('kruntimes_jobclass_ambiguous_default 0', async () =>
        (await jobclassMetrics()).includes('kruntimes_jobclass_ambiguous_default 0'),
      );
    } finally {
      // Later specs (and files) assume no global default.
      for (const c of [d1, d2]) await setAnnotation(`${CLASSES}/${c}`, DEFAULT_CLASS, null).catch(() => undefined);
    }
  });

  it('jobclass: explicit class beats namespace default beats global default', async () => {
    const [g, nd, ex] = [`${p}-global`, `${p}-nsdef`, `${p}-explicit`];
    const uids = { [g]: await cls(g, true), [nd]: await cls(nd, false), [ex]: await cls(ex, false) };
    try {
      const annotated = await ns('jcprec', { [NAMESPACE_DEFAULT]: nd });
      const plain = await ns('jcprec');
      const cases: [string, string, string | undefined, string][] = [
        [annotated, 'explicit', ex, ex],
        [annotated, 'namespace-default', undefined, nd],
        [plain, 'explicit', ex, ex],
        [plain, 'global-default', undefined, g],
      ];
      for (const [n, name, explicit] of cases)
        await job(n, name, { ...(explicit ? { jobClassName: explicit } : {}), image: 'bash:5', command: TRUE });
      for (const [n, name, , want] of cases) {
        const j = await untilReason(n, name, 'Accepted', 'Accepted', 'True');
        assert.equal(j.status?.resolvedJobClass?.name, want, `${n}/${name} resolves to ${want}`);
        assert.equal(j.status?.resolvedJobClass?.uid, uids[want]);
      }
      // A namespace default that does not exist is an error, never a fallback to the global default.
      const dangling = await ns('jcprec', { [NAMESPACE_DEFAULT]: `${p}-missing` });
      await assert.rejects(
        job(dangling, 'x', { image: 'bash:5', command: TRUE }),
        rejectedWith(422, new RegExp(`namespace default JobClass "${p}-missing" does not exist`)),
      );
    } finally {
      await setAnnotation(`${CLASSES}/${g}`, DEFAULT_CLASS, null).catch(() => undefined);
    }
  });
});

describe('JobClass matrix: allowedNamespaces', function () {
  const c = `e2e-allow-${uniq}`;
  const label = `e2e.example.com/jobclass-${uniq}`;
  let allowed: string;
  let other: string;
  before(async () => {
    allowed = await newNamespace('jcallow');
    other = await newNamespace('jcdeny');
    for (const n of [allowed, other]) await serviceAccount(n);
    await setLabel(allowed, label, 'enabled');
    await readyKubernetesClass(c, {}, { spec: { allowedNamespaces: { matchLabels: { [label]: 'enabled' } } } });
  });
  after(async () => {
    await deleteNamespace(allowed);
    await deleteNamespace(other);
    await cleanup([`${CLASSES}/${c}`, `${K_PARAMS}/${c}-params`]);
  });

  it('jobclass: allowedNamespaces is enforced at admission and acceptance; removing the label does not stop a running Job', async () => {
    await assert.rejects(
      job(other, 'denied', { jobClassName: c, image: 'bash:5', command: TRUE }),
      rejectedWith(403, new RegExp(`JobClass "${c}" is not allowed in namespace ${other}`)),
      'knowing the class name is not enough',
    );

    // Acceptance re-checks the namespace: a Job admitted while the label was there, still
    // waiting for its Secret when the label goes, is not accepted.
    await job(allowed, 'late', {
      jobClassName: c,
      image: 'bash:5',
      command: ['bash', '-c', 'test "$TOKEN" = t0ken'],
      env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'late-secret', key: 'token' } } }],
    });
    await untilReason(allowed, 'late', 'Accepted', 'SecretNotFound', 'False');
    await setLabel(allowed, label, null);
    const denied = await untilReason(allowed, 'late', 'Accepted', 'NamespaceNotAllowed', 'False');
    assert.match(
      cond(denied, 'Accepted')?.message ?? '',
      new RegExp(`namespace ${allowed} does not match spec.allowedNamespaces of JobClass ${c}`),
    );
    assert.deepEqual(await executionsOf(allowed, denied.metadata.uid), { batchJobs: [], pods: [] });

    // A label added (back) later admits it.
    await admin().create(`/api/v1/namespaces/${allowed}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'late-secret' },
      stringData: { token: 't0ken' },
    });
    await setLabel(allowed, label, 'enabled');
    await succeeded(allowed, 'late');

    // The label removed after acceptance changes nothing for the accepted Job; new Jobs are refused.
    const g = gate('allow-running');
    await job(allowed, 'running', { jobClassName: c, image: 'bash:5', command: g.command });
    await running(allowed, 'running');
    await setLabel(allowed, label, null);
    await assert.rejects(
      job(allowed, 'after', { jobClassName: c, image: 'bash:5', command: TRUE }),
      rejectedWith(403, /not allowed in namespace/),
    );
    g.open();
    const done = await succeeded(allowed, 'running');
    assert.equal(cond(done, 'Accepted')?.reason, 'Accepted');
  });
});

describe('JobClass matrix: class configuration', function () {
  const p = `e2e-cfg-${uniq}`;
  let n: string;
  const owned: string[] = [];
  before(async () => {
    n = await newNamespace('jccfg');
    await serviceAccount(n);
  });
  after(async () => {
    await deleteNamespace(n);
    await cleanup(owned);
  });

  it('jobclass: UnsupportedController and InvalidParametersReference classes are Accepted=False and take no Jobs', async () => {
    owned.push(`${K_PARAMS}/${p}-params`);
    await admin().create(K_PARAMS, kubernetesParams(`${p}-params`));
    const cases = [
      {
        name: `${p}-foreign`,
        spec: {
          controllerName: 'e2e.example.com/not-ours',
          parametersRef: { group: G, kind: 'KubernetesExecutionParameters', name: `${p}-params` },
        },
        reason: 'UnsupportedController',
        message:
          /controllerName e2e\.example\.com\/not-ours is not one of execution\.ayatori\.ddupan\.top\/kubernetes, execution\.ayatori\.ddupan\.top\/opensandbox/,
      },
      {
        name: `${p}-wrongkind`,
        spec: {
          controllerName: `${G}/kubernetes`,
          parametersRef: { group: G, kind: 'OpenSandboxExecutionParameters', name: `${p}-params` },
        },
        reason: 'InvalidParametersReference',
        message:
          /supports parametersRef KubernetesExecutionParameters\.execution\.ayatori\.ddupan\.top, not OpenSandboxExecutionParameters/,
      },
      {
        name: `${p}-unknowncrd`,
        spec: { controllerName: `${G}/kubernetes`, parametersRef: { group: 'example.com', kind: 'Widget', name: 'w' } },
        reason: 'InvalidParametersReference',
        message: /not Widget\.example\.com/,
      },
    ];
    for (const k of cases) {
      owned.unshift(`${CLASSES}/${k.name}`);
      await admin().create(CLASSES, {
        apiVersion: API_VERSION,
        kind: 'JobClass',
        metadata: { name: k.name },
        spec: k.spec,
      });
    }
    for (const k of cases) {
      const obj = await classUntil(k.name, 'Accepted', k.reason, 'False');
      assert.match(cond(obj, 'Accepted')?.message ?? '', k.message);
      assert.equal(cond(obj, 'Ready')?.status, 'False');
      assert.equal(cond(obj, 'Ready')?.reason, 'NotAccepted');
      const w = await eventually(`a Warning Event for ${k.name}`, async () =>
        (await eventsOf(obj.metadata.uid)).find((e) => e.reason === k.reason),
      );
      assert.equal(w.type, 'Warning');
      await job(n, k.name, { jobClassName: k.name, image: 'bash:5', command: TRUE });
      const j = await untilReason(n, k.name, 'Accepted', 'JobClassNotAccepted', 'False');
      assert.match(
        cond(j, 'Accepted')?.message ?? '',
        new RegExp(`JobClass ${k.name} is not accepted \\(${k.reason}: `),
      );
      assert.deepEqual(await executionsOf(n, j.metadata.uid), { batchJobs: [], pods: [] });
    }
    // controllerName and parametersRef cannot be edited into something valid: a new class is needed.
    await assert.rejects(
      admin().patch(`${CLASSES}/${p}-foreign`, { spec: { controllerName: `${G}/kubernetes` } }),
      rejectedWith(422, /spec\.controllerName is immutable/),
    );
    await assert.rejects(
      admin().patch(`${CLASSES}/${p}-wrongkind`, {
        spec: { parametersRef: { kind: 'KubernetesExecutionParameters' } },
      }),
      rejectedWith(422, /spec\.parametersRef is immutable/),
    );
  });

  it('jobclass: parameters created after the class flip Accepted; recreated parameters are not adopted by existing Jobs', async () => {
    const c = `${p}-late`;
    const params = `${K_PARAMS}/${c}-params`;
    owned.unshift(params);
    owned.unshift(`${CLASSES}/${c}`);
    await admin().create(CLASSES, kubernetesClass(c, `${c}-params`));
    const missing = await classUntil(c, 'Accepted', 'ParametersNotFound', 'False');
    assert.match(
      cond(missing, 'Accepted')?.message ?? '',
      new RegExp(`KubernetesExecutionParameters ${c}-params does not exist`),
    );
    const noSa = await newNamespace('jclate');
    try {
      // Submitted before the parameters exist: waits, then is accepted once they appear.
      await job(noSa, 'early', { jobClassName: c, image: 'bash:5', command: TRUE });
      await untilReason(noSa, 'early', 'Accepted', 'JobClassNotAccepted', 'False');
      await admin().create(K_PARAMS, kubernetesParams(`${c}-params`));
      await classReady(c);
      const oldUid = (await admin().get<Job>(params)).metadata.uid;
      // Its namespace lacks the ServiceAccount, so it stays accepted but unscheduled.
      const early = await untilReason(noSa, 'early', 'Scheduled', 'ServiceAccountNotFound', 'False');
      assert.equal(
        early.status?.resolvedJobClass?.parametersRef?.uid,
        oldUid,
        'the parameters UID is frozen once they are seen',
      );
      const g = gate('late-running');
      await job(n, 'late-running', { jobClassName: c, image: 'bash:5', command: g.command });
      await running(n, 'late-running');

      // Deleting referenced parameters is blocked and reported, not silent.
      await admin().delete(params);
      const blocked = await admin().get<Job>(params);
      assert.ok(blocked.metadata.deletionTimestamp);
      const w = await eventually('DeletionBlocked on the parameters', async () =>
        (await eventsOf(blocked.metadata.uid)).find((e) => e.reason === 'DeletionBlocked'),
      );
      assert.equal(w.type, 'Warning');
      assert.match(w.message, new RegExp(`still referenced by JobClass ${c}`));
      // Administrator recovery removes the finalizer; the same name is recreated with a new UID.
      await forceRemove(params);
      await classUntil(c, 'Accepted', 'ParametersNotFound', 'False');
      await admin().create(K_PARAMS, kubernetesParams(`${c}-params`));
      await classReady(c);
      const newUid = (await admin().get<Job>(params)).metadata.uid;
      assert.notEqual(newUid, oldUid);
      const replaced = await untilReason(noSa, 'early', 'Scheduled', 'ParametersReplaced', 'False');
      assert.match(
        cond(replaced, 'Scheduled')?.message ?? '',
        new RegExp(`was recreated \\(uid ${oldUid} -> ${newUid}\\); the Job does not adopt the new object`),
      );
      // Even with its ServiceAccount provisioned the old Job is not run on the new object, while a new Job is.
      await serviceAccount(noSa);
      await job(noSa, 'fresh', { jobClassName: c, image: 'bash:5', command: TRUE });
      const fresh = await succeeded(noSa, 'fresh');
      assert.equal(fresh.status?.resolvedJobClass?.parametersRef?.uid, newUid);
      const still = await getJob(noSa, 'early');
      assert.equal(cond(still, 'Scheduled')?.reason, 'ParametersReplaced');
      assert.equal(still.status?.execution, undefined);
      assert.deepEqual(await executionsOf(noSa, still.metadata.uid), { batchJobs: [], pods: [] });
      // The running Job is observed to completion on its recorded execution.
      g.open();
      const done = await succeeded(n, 'late-running');
      assert.equal(done.status?.resolvedJobClass?.parametersRef?.uid, oldUid);
    } finally {
      await deleteNamespace(noSa);
    }
  });

  it('jobclass: CRD rejects request > limit; admission rejects out-of-policy resources; defaults fill effectiveResources', async () => {
    const c = `${p}-res`;
    owned.unshift(`${CLASSES}/${c}`, `${K_PARAMS}/${c}-params`);
    await admin().create(K_PARAMS, kubernetesParams(`${c}-params`));
    // The CRD refuses an inconsistent class policy outright.
    await assert.rejects(
      admin().create(
        CLASSES,
        kubernetesClass(`${c}-bad1`, `${c}-params`, {
          spec: { resources: { defaults: { requests: { cpu: '2' }, limits: { cpu: '1' } } } },
        }),
      ),
      rejectedWith(
        422,
        /spec\.resources\.defaults\.requests\.cpu must be less than or equal to spec\.resources\.defaults\.limits\.cpu/,
      ),
    );
    await assert.rejects(
      admin().create(
        CLASSES,
        kubernetesClass(`${c}-bad2`, `${c}-params`, {
          spec: { resources: { minimum: { limits: { memory: '2Gi' } }, maximum: { limits: { memory: '1Gi' } } } },
        }),
      ),
      rejectedWith(
        422,
        /spec\.resources\.minimum\.limits\.memory must be less than or equal to spec\.resources\.maximum\.limits\.memory/,
      ),
    );
    // A contradiction CEL does not see (a default above the maximum) is InvalidResourcePolicy.
    owned.unshift(`${CLASSES}/${c}-bad3`);
    await admin().create(
      CLASSES,
      kubernetesClass(`${c}-bad3`, `${c}-params`, {
        spec: { resources: { defaults: { limits: { cpu: '4' } }, maximum: { limits: { cpu: '2' } } } },
      }),
    );
    const bad = await classUntil(`${c}-bad3`, 'Accepted', 'InvalidResourcePolicy', 'False');
    assert.match(
      cond(bad, 'Accepted')?.message ?? '',
      /spec\.resources\.defaults\.limits\.cpu \(4\) must not exceed spec\.resources\.maximum\.limits\.cpu \(2\)/,
    );

    await readyKubernetesClass(
      c,
      {},
      {
        spec: {
          resources: {
            defaults: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
            minimum: { requests: { cpu: '50m' } },
            maximum: { limits: { cpu: '1', memory: '1Gi' } },
          },
        },
      },
    );
    const run = (name: string, resources?: Record<string, unknown>): Promise<void> =>
      job(n, name, { jobClassName: c, image: 'bash:5', command: TRUE, ...(resources ? { resources } : {}) });
    await assert.rejects(
      run('req-gt-lim', { requests: { cpu: '2' }, limits: { cpu: '1' } }),
      rejectedWith(422, /spec\.resources\.requests\.cpu must be less than or equal to spec\.resources\.limits\.cpu/),
    );
    await assert.rejects(
      run('mem-gt-lim', { requests: { memory: '1025Mi' }, limits: { memory: '1Gi' } }),
      rejectedWith(
        422,
        /spec\.resources\.requests\.memory must be less than or equal to spec\.resources\.limits\.memory/,
      ),
    );
    await assert.rejects(
      run('above-max', { limits: { cpu: '1001m' } }),
      rejectedWith(
        422,
        new RegExp(`spec\\.resources\\.limits\\.cpu 1001m is above the JobClass maximum 1 \\(JobClass ${c}\\)`),
      ),
    );
    await assert.rejects(
      run('below-min', { requests: { cpu: '10m' } }),
      rejectedWith(
        422,
        new RegExp(`spec\\.resources\\.requests\\.cpu 10m is below the JobClass minimum 50m \\(JobClass ${c}\\)`),
      ),
    );
    // Boundaries: 1000m == 1 and 1024Mi == 1Gi are within the maximum; a defaulted request is capped at the Job's smaller limit.
    // The Pod template shows the API server's canonical form of the same quantities.
    type R = Record<string, Record<string, string>>;
    const dflt = { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } };
    const cases: [string, Record<string, unknown> | undefined, R, R][] = [
      ['defaults', undefined, dflt, dflt],
      [
        'at-max',
        { requests: { cpu: '0.5' }, limits: { cpu: '1000m', memory: '1024Mi' } },
        { requests: { cpu: '0.5', memory: '64Mi' }, limits: { cpu: '1000m', memory: '1024Mi' } },
        { requests: { cpu: '500m', memory: '64Mi' }, limits: { cpu: '1', memory: '1Gi' } },
      ],
      [
        'capped',
        { limits: { cpu: '50m' } },
        { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '50m', memory: '256Mi' } },
        { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '50m', memory: '256Mi' } },
      ],
    ];
    for (const [name, resources] of cases) await run(name, resources);
    for (const [name, , want, pod] of cases) {
      const j = await succeeded(n, name);
      assert.deepEqual(j.status?.effectiveResources, want, `${name}: effectiveResources`);
      const { batchJobs } = await executionsOf(n, j.metadata.uid);
      assert.deepEqual(
        batchJobs[0]?.spec.template.spec.containers[0]?.resources,
        pod,
        `${name}: the Pod template carries exactly the effective resources`,
      );
    }
  });

  it("jobclass: editing class resources leaves accepted Jobs' effectiveResources and Pods unchanged", async () => {
    const c = `${p}-edit`;
    owned.unshift(`${CLASSES}/${c}`, `${K_PARAMS}/${c}-params`);
    const before = { requests: { cpu: '200m', memory: '128Mi' }, limits: { cpu: '400m', memory: '256Mi' } };
    await readyKubernetesClass(
      c,
      {},
      { spec: { resources: { defaults: before, maximum: { limits: { cpu: '1', memory: '1Gi' } } } } },
    );
    const noSa = await newNamespace('jcedit');
    try {
      // Accepted, but not scheduled until its ServiceAccount exists.
      await job(noSa, 'accepted', { jobClassName: c, image: 'bash:5', command: TRUE });
      const acc = await untilReason(noSa, 'accepted', 'Scheduled', 'ServiceAccountNotFound', 'False');
      assert.deepEqual(acc.status?.effectiveResources, before);
      // New defaults, and a maximum the accepted Job's limits now exceed.
      const after = { requests: { cpu: '50m', memory: '32Mi' }, limits: { cpu: '100m', memory: '64Mi' } };
      await admin().patch(`${CLASSES}/${c}`, {
        spec: { resources: { defaults: after, maximum: { limits: { cpu: '100m', memory: '64Mi' } } } },
      });
      const generation = (await getClass(c)).metadata.generation;
      await eventually('the edited class evaluated', async () => {
        const a = cond(await getClass(c), 'Accepted') as { status: string; observedGeneration?: number } | undefined;
        return a?.status === 'True' && a.observedGeneration === generation;
      });
      await serviceAccount(noSa);
      await job(noSa, 'new', { jobClassName: c, image: 'bash:5', command: TRUE });
      for (const [name, want] of [
        ['accepted', before],
        ['new', after],
      ] as const) {
        const j = await succeeded(noSa, name);
        assert.deepEqual(j.status?.effectiveResources, want, `${name}: effectiveResources`);
        const { batchJobs } = await executionsOf(noSa, j.metadata.uid);
        assert.deepEqual(batchJobs[0]?.spec.template.spec.containers[0]?.resources, want, `${name}: Pod resources`);
      }
      await assert.rejects(
        job(noSa, 'too-big', { jobClassName: c, image: 'bash:5', command: TRUE, resources: before }),
        rejectedWith(422, /limits/),
        'the new policy applies to new Jobs',
      );
    } finally {
      await deleteNamespace(noSa);
    }
  });
});

describe('JobClass matrix: Kubernetes readiness, deletion and recreation', function () {
  let n: string;
  const owned: string[] = [];
  before(async () => {
    n = await newNamespace('jclife');
    await serviceAccount(n);
  });
  after(async () => {
    await deleteNamespace(n);
    await cleanup(owned);
  });

  it('jobclass: deleting the RuntimeClass makes the class Ready=False; new Jobs wait Scheduled=False while running Jobs complete and can be cancelled and deleted', async () => {
    const c = `e2e-rc-${uniq}`;
    const rcPath = `/apis/node.k8s.io/v1/runtimeclasses/${c}`;
    const rc = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: c }, handler: 'runc' };
    owned.unshift(rcPath, `${CLASSES}/${c}`, `${K_PARAMS}/${c}-params`);
    await admin().create('/apis/node.k8s.io/v1/runtimeclasses', rc);
    const readyCls = await readyKubernetesClass(c, { runtimeClassName: c });
    assert.match(cond(readyCls, 'Ready')?.message ?? '', new RegExp(`RuntimeClass ${c} exists`));
    const g = gate('rc-complete');
    for (const name of ['complete', 'cancel', 'delete'])
      await job(n, `rc-${name}`, {
        jobClassName: c,
        image: 'bash:5',
        command: name === 'complete' ? g.command : ['bash', '-c', 'sleep 300'],
      });
    const del = await running(n, 'rc-delete');
    await running(n, 'rc-cancel');
    const comp = await running(n, 'rc-complete');
    assert.equal((await executionsOf(n, comp.metadata.uid)).batchJobs[0]?.spec.template.spec.runtimeClassName, c);

    await admin().delete(rcPath);
    const notReady = await classUntil(c, 'Ready', 'RuntimeClassNotFound', 'False');
    assert.match(cond(notReady, 'Ready')?.message ?? '', new RegExp(`RuntimeClass ${c} does not exist`));
    await job(n, 'rc-new', { jobClassName: c, image: 'bash:5', command: TRUE });
    const waiting = await untilReason(n, 'rc-new', 'Scheduled', 'JobClassNotReady', 'False');
    assert.equal(cond(waiting, 'Accepted')?.status, 'True', 'not Ready is not a rejection');
    assert.match(cond(waiting, 'Scheduled')?.message ?? '', /RuntimeClassNotFound/);

    // Existing executions are still observed, cancelled and deleted.
    g.open();
    await succeeded(n, 'rc-complete');
    await admin().patch(`${X}/namespaces/${n}/jobs/rc-cancel`, { spec: { cancelRequested: true } });
    const cancelled = await until(n, 'rc-cancel', (x) => x.status?.phase === 'Failed', 'Failed (cancelled)', 90_000);
    assert.equal(cond(cancelled, 'Failed')?.reason, 'Cancelled');
    await admin().delete(`${X}/namespaces/${n}/jobs/rc-delete`);
    await eventually(
      "the deleted Job's batch Job and Pods garbage-collected",
      async () => {
        const e = await executionsOf(n, del.metadata.uid);
        return e.batchJobs.length === 0 && e.pods.length === 0;
      },
      90_000,
    );
    assert.equal(
      cond(await getClass(c), 'Ready')?.reason,
      'RuntimeClassNotFound',
      'all of the above happened while the class was not Ready',
    );
    assert.deepEqual(
      await executionsOf(n, waiting.metadata.uid),
      { batchJobs: [], pods: [] },
      'nothing was created for the new Job',
    );

    await admin().create('/apis/node.k8s.io/v1/runtimeclasses', rc);
    await classReady(c);
    const ran = await succeeded(n, 'rc-new');
    assert.deepEqual(
      (await executionsOf(n, ran.metadata.uid)).batchJobs.map((b) => b.spec.template.spec.runtimeClassName),
      [c],
      'it ran with the RuntimeClass, never without it',
    );
  });

  it('jobclass: class deletion waits for non-terminal Jobs and completes after they finish', async () => {
    const c = `e2e-del-${uniq}`;
    owned.unshift(`${CLASSES}/${c}`, `${K_PARAMS}/${c}-params`);
    const cls = await readyKubernetesClass(c);
    await job(n, 'del-done', { jobClassName: c, image: 'bash:5', command: TRUE });
    await succeeded(n, 'del-done');
    const g = gate('del-busy');
    await job(n, 'del-busy', { jobClassName: c, image: 'bash:5', command: g.command });
    await running(n, 'del-busy');

    await admin().delete(`${CLASSES}/${c}`);
    const w = await eventually('DeletionBlocked on the class', async () =>
      (await eventsOf(cls.metadata.uid)).find((e) => e.reason === 'DeletionBlocked'),
    );
    assert.equal(w.type, 'Warning');
    assert.match(
      w.message,
      new RegExp(`JobClass ${c} is deleted once its 1 non-terminal Job\\(s\\) finish: ${n}/del-busy$`),
      'only the running Job blocks, not the finished one',
    );
    const terminating = await getClass(c);
    assert.ok(
      terminating.metadata.deletionTimestamp && terminating.metadata.finalizers?.includes(`${G}/jobclass-protection`),
    );
    await assert.rejects(
      job(n, 'del-new', { jobClassName: c, image: 'bash:5', command: TRUE }),
      rejectedWith(422, new RegExp(`JobClass "${c}" is being deleted`)),
    );
    // Its parameters cannot go while the class references them.
    await admin().delete(`${K_PARAMS}/${c}-params`);
    const params = await admin().get<Job>(`${K_PARAMS}/${c}-params`);
    assert.ok(params.metadata.deletionTimestamp);

    g.open();
    await succeeded(n, 'del-busy');
    await eventually404('the class deleted once its Job finished', `${CLASSES}/${c}`);
    await eventually404('the parameters deleted once no class references them', `${K_PARAMS}/${c}-params`);
  });

  it('jobclass: recreating a same-name class or parameters object does not move existing Jobs', async () => {
    const c = `e2e-same-${uniq}`;
    owned.unshift(`${CLASSES}/${c}`, `${K_PARAMS}/${c}-params`);
    const old = await readyKubernetesClass(c);
    const g = gate('same-running');
    await job(n, 'same-running', { jobClassName: c, image: 'bash:5', command: g.command });
    await running(n, 'same-running');
    const noSa = await newNamespace('jcsame');
    try {
      await job(noSa, 'same-waiting', { jobClassName: c, image: 'bash:5', command: TRUE });
      await untilReason(noSa, 'same-waiting', 'Scheduled', 'ServiceAccountNotFound', 'False');
      // Administrator recovery deletes the class despite its Jobs; the same name comes back with a new UID.
      await admin().delete(`${CLASSES}/${c}`);
      await forceRemove(`${CLASSES}/${c}`);
      await admin().create(CLASSES, kubernetesClass(c, `${c}-params`));
      const fresh = await classReady(c);
      assert.notEqual(fresh.metadata.uid, old.metadata.uid);
      const replaced = await untilReason(noSa, 'same-waiting', 'Scheduled', 'JobClassReplaced', 'False');
      assert.match(
        cond(replaced, 'Scheduled')?.message ?? '',
        new RegExp(
          `JobClass ${c} was recreated \\(uid ${old.metadata.uid} -> ${fresh.metadata.uid}\\); the Job is not moved`,
        ),
      );
      await serviceAccount(noSa);
      await job(noSa, 'same-new', { jobClassName: c, image: 'bash:5', command: TRUE });
      const newer = await succeeded(noSa, 'same-new');
      assert.equal(newer.status?.resolvedJobClass?.uid, fresh.metadata.uid);
      const still = await getJob(noSa, 'same-waiting');
      assert.equal(cond(still, 'Scheduled')?.reason, 'JobClassReplaced');
      assert.equal(still.status?.resolvedJobClass?.uid, old.metadata.uid);
      assert.deepEqual(
        await executionsOf(noSa, still.metadata.uid),
        { batchJobs: [], pods: [] },
        'the old Job is never run on the new class',
      );
      g.open();
      const done = await succeeded(n, 'same-running');
      assert.equal(
        done.status?.resolvedJobClass?.uid,
        old.metadata.uid,
        'the running Job finished on its recorded execution',
      );
      // The replaced Job still belongs to the old class: cancelling it ends it without running anything.
      await admin().patch(`${X}/namespaces/${noSa}/jobs/same-waiting`, { spec: { cancelRequested: true } });
      const cancelled = await until(noSa, 'same-waiting', (x) => x.status?.phase === 'Failed', 'Failed (cancelled)');
      assert.equal(cond(cancelled, 'Failed')?.reason, 'Cancelled');
    } finally {
      await deleteNamespace(noSa);
    }
  });
});

describe('JobClass matrix: OpenSandbox allowances (local server)', function () {
  let n: string;
  let srv: OpenSandboxTestServer;
  const c = `e2e-osallow-${uniq}`;
  const owned: string[] = [];
  const classFor = async (name: string, allow: boolean): Promise<void> => {
    owned.unshift(`${CLASSES}/${name}`, `${OS_PARAMS}/${name}-params`);
    await admin().create(OS_PARAMS, {
      apiVersion: API_VERSION,
      kind: 'OpenSandboxExecutionParameters',
      metadata: { name: `${name}-params` },
      spec: {
        endpoint: srv.url,
        apiKeySecretRef: { namespace: n, name: 'opensandbox-api', key: 'api-key' },
        ...(allow ? { allowSecretEnv: true, allowImageAuth: true } : {}),
      },
    });
    await admin().create(CLASSES, {
      apiVersion: API_VERSION,
      kind: 'JobClass',
      metadata: { name },
      spec: {
        controllerName: OPENSANDBOX,
        parametersRef: { group: G, kind: 'OpenSandboxExecutionParameters', name: `${name}-params` },
        resources: { defaults: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } },
      },
    });
    await classReady(name, 90_000);
  };
  before(async () => {
    n = await newNamespace('jcosallow');
    srv = await startOpenSandboxServer({ apiKeys: ['key-1'], insecure: true });
    const secret = (name: string, body: Record<string, unknown>): Promise<unknown> =>
      admin().create(`/api/v1/namespaces/${n}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name },
        ...body,
      });
    await secret('opensandbox-api', { stringData: { 'api-key': 'key-1' } });
    await secret('token', { stringData: { token: 'env-s3cret' } });
    await secret('pull', {
      type: 'kubernetes.io/dockerconfigjson',
      stringData: {
        '.dockerconfigjson': JSON.stringify({
          auths: { 'registry.example.test': { username: 'robot', password: 'pull-s3cret' } },
        }),
      },
    });
    await classFor(`${c}-deny`, false);
    await classFor(`${c}-allow`, true);
  });
  after(async () => {
    assert.deepEqual(srv.requestViolations, [], 'every request conformed to the vendored OpenAPI spec');
    await deleteNamespace(n);
    await srv.close();
    await cleanup(owned);
  });

  it('jobclass/opensandbox: admission rejects Secret env and imagePullSecret unless allowed', async () => {
    const secretEnv = [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'token', key: 'token' } } }];
    const base = { image: 'registry.example.test/tools/runner:1', command: ['run'] };
    await assert.rejects(
      job(n, 'env-denied', { jobClassName: `${c}-deny`, ...base, env: secretEnv }),
      rejectedWith(
        422,
        new RegExp(
          `spec\\.env uses secretKeyRef, but ${c}-deny-params does not set allowSecretEnv \\(JobClass ${c}-deny, SecretEnvNotAllowed\\)`,
        ),
      ),
    );
    await assert.rejects(
      job(n, 'auth-denied', { jobClassName: `${c}-deny`, ...base, imagePullSecret: { name: 'pull' } }),
      rejectedWith(
        422,
        new RegExp(
          `spec\\.imagePullSecret is set, but ${c}-deny-params does not set allowImageAuth \\(JobClass ${c}-deny, ImageAuthNotAllowed\\)`,
        ),
      ),
    );
    // The same class takes a Job with a literal env value (the refusal is about the Secret, not env).
    await job(n, 'plain', { jobClassName: `${c}-deny`, ...base, env: [{ name: 'MODE', value: 'plain' }] });
    const plain = await until(n, 'plain', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    const plainId = plain.status?.execution?.sandboxID ?? '';
    assert.deepEqual(srv.sandboxes.get(plainId)?.request.env, { MODE: 'plain' });
    assert.equal(srv.sandboxes.get(plainId)?.request.image?.auth, undefined);

    // With the allowances the resolved values are sent to the backend, and nowhere else.
    await job(n, 'allowed', { jobClassName: `${c}-allow`, ...base, env: secretEnv, imagePullSecret: { name: 'pull' } });
    const j = await until(n, 'allowed', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    const allowedId = j.status?.execution?.sandboxID ?? '';
    const sb = srv.sandboxes.get(allowedId);
    assert.deepEqual(sb?.request.env, { TOKEN: 'env-s3cret' });
    assert.deepEqual(sb?.request.image?.auth, { username: 'robot', password: 'pull-s3cret' });
    assert.deepEqual(sb?.request.resourceLimits, { cpu: '1', memory: '1Gi' }, 'the effective limits, not lowered');
    for (const id of [plainId, allowedId]) srv.finish(id, true);
    for (const name of ['plain', 'allowed']) {
      const done = await until(n, name, (x) => x.status?.phase === 'Succeeded', 'Succeeded');
      assert.ok(!/s3cret/.test(JSON.stringify(done)), 'no Secret value in the Job');
    }
    const events = (await admin().list<{ message: string } & Job>(`/api/v1/namespaces/${n}/events`)).items;
    assert.ok(!events.some((e) => /s3cret/.test(e.message)), 'no Secret value in Events');

    // Acceptance checks the allowance again: a Job admitted while it was allowed, still waiting
    // for a ConfigMap when the administrator withdraws allowSecretEnv, is not accepted once the
    // ConfigMap appears (ConfigMaps are read by name at each evaluation; a waiting Job re-checks).
    await job(n, 'withdrawn', {
      jobClassName: `${c}-allow`,
      ...base,
      env: [...secretEnv, { name: 'MODE', valueFrom: { configMapKeyRef: { name: 'later', key: 'mode' } } }],
    });
    await until(
      n,
      'withdrawn',
      (x) => cond(x, 'Accepted')?.reason === 'ConfigMapNotFound',
      'Accepted=False/ConfigMapNotFound',
    );
    await admin().patch(`${OS_PARAMS}/${c}-allow-params`, { spec: { allowSecretEnv: false } });
    await admin().create(`/api/v1/namespaces/${n}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'later' },
      data: { mode: 'm' },
    });
    const refused = await until(
      n,
      'withdrawn',
      (x) => cond(x, 'Accepted')?.reason === 'SecretEnvNotAllowed',
      'Accepted=False/SecretEnvNotAllowed',
    );
    assert.equal(cond(refused, 'Accepted')?.status, 'False');
    assert.match(cond(refused, 'Accepted')?.message ?? '', new RegExp(`${c}-allow-params does not set allowSecretEnv`));
    assert.equal(refused.status?.execution, undefined);
    assert.ok(
      ![...srv.sandboxes.values()].some(
        (x) => x.request.metadata?.['execution.ayatori.ddupan.top/job-uid'] === refused.metadata.uid,
      ),
      'no sandbox',
    );
  });
});
