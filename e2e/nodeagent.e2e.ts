/** What the node agent does for Pods: env and volumes of every supported kind, PVCs, restart policy, refusals. */
import assert from 'node:assert/strict';
import { admin, deleteNamespace, eventually, newNamespace, type Obj } from './helpers.ts';

type PodObj = Obj & {
  status?: {
    phase?: string;
    containerStatuses?: {
      restartCount: number;
      state: Record<string, { reason?: string; message?: string; exitCode?: number }>;
    }[];
  };
};

async function createPod(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await admin().create(`/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: name } },
    spec,
  });
}

async function podDone(ns: string, name: string): Promise<PodObj> {
  return eventually(`pod ${name} to finish`, async () => {
    const p = await admin().get<PodObj>(`/api/v1/namespaces/${ns}/pods/${name}`);
    return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
  });
}

const logOf = (ns: string, name: string): Promise<string> =>
  admin().getText(`/api/v1/namespaces/${ns}/pods/${name}/log`);

describe('node agent: Pods as host processes', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('agent');
    await admin().create(`/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cfg' },
      data: { greeting: 'hello from a configmap', mode: 'fast' },
    });
    await admin().create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'sec' },
      stringData: { password: 's3cr3t' },
    });
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('resolves env (Secret, ConfigMap, envFrom, downward API, $(VAR)) and mounts configMap, secret, downwardAPI and the service-account token', async () => {
    const script = [
      'import json, os, ssl, urllib.request',
      'sa = "/var/run/secrets/kubernetes.io/serviceaccount"',
      'print("env", os.environ["PASSWORD"], os.environ["CFG_mode"], os.environ["MY_NS"], os.environ["COMBINED"])',
      'print("cfg", open("/etc/cfg/greeting").read())',
      'print("sec", open("/etc/sec/password").read())',
      'print("labels", open("/etc/podinfo/labels").read().strip())',
      'print("ns-file", open(sa + "/namespace").read())',
      'ctx = ssl.create_default_context(cafile=sa + "/ca.crt")',
      'url = "https://%s:%s/apis/authentication.k8s.io/v1/selfsubjectreviews" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])',
      'body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()',
      'req = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer " + open(sa + "/token").read(), "Content-Type": "application/json"})',
      'info = json.load(urllib.request.urlopen(req, context=ctx))["status"]["userInfo"]',
      'print("whoami", info["username"], info["extra"]["authentication.kubernetes.io/pod-name"][0])',
    ].join('\n');
    await createPod(ns, 'envvol', {
      restartPolicy: 'Never',
      volumes: [
        { name: 'cfg', configMap: { name: 'cfg' } },
        { name: 'sec', secret: { secretName: 'sec' } },
        {
          name: 'podinfo',
          downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: "metadata.labels['app']" } }] },
        },
      ],
      containers: [
        {
          name: 'main',
          image: 'python:3.12',
          command: ['python3', '-c', script],
          env: [
            { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'sec', key: 'password' } } },
            { name: 'MY_NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
            { name: 'COMBINED', value: '$(MY_NS)/$(PASSWORD)' },
            { name: 'MISSING', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'nope', optional: true } } },
          ],
          envFrom: [{ prefix: 'CFG_', configMapRef: { name: 'cfg' } }],
          volumeMounts: [
            { name: 'cfg', mountPath: '/etc/cfg' },
            { name: 'sec', mountPath: '/etc/sec' },
            { name: 'podinfo', mountPath: '/etc/podinfo' },
          ],
        },
      ],
    });
    const pod = await podDone(ns, 'envvol');
    const log = await logOf(ns, 'envvol');
    assert.equal(pod.status?.phase, 'Succeeded', log);
    assert.match(log, new RegExp(`^env s3cr3t fast ${ns} ${ns}/s3cr3t$`, 'm'));
    assert.match(log, /^cfg hello from a configmap$/m);
    assert.match(log, /^sec s3cr3t$/m);
    assert.match(log, /^labels envvol$/m);
    assert.match(log, new RegExp(`^ns-file ${ns}$`, 'm'));
    assert.match(
      log,
      new RegExp(`^whoami system:serviceaccount:${ns}:default envvol$`, 'm'),
      'the bound token works against the loopback API server',
    );
  });

  it('keeps PersistentVolumeClaim data across Pods (local-dir provisioner)', async () => {
    await admin().create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'data' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    const pvc = (cmd: string): Record<string, unknown> => ({
      restartPolicy: 'Never',
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
      containers: [
        {
          name: 'main',
          image: 'bash',
          command: ['bash', '-c', cmd],
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
        },
      ],
    });
    await createPod(ns, 'writer', pvc('echo persisted-$(date +%s) > /data/file && cat /data/file'));
    assert.equal((await podDone(ns, 'writer')).status?.phase, 'Succeeded');
    const written = (await logOf(ns, 'writer')).trim();
    await createPod(ns, 'reader', pvc('cat /data/file'));
    assert.equal((await podDone(ns, 'reader')).status?.phase, 'Succeeded');
    assert.equal((await logOf(ns, 'reader')).trim(), written);
    assert.match(written, /^persisted-\d+$/);
  });

  it('restarts a failing container under restartPolicy OnFailure and reports the restart', async () => {
    await createPod(ns, 'flaky', {
      restartPolicy: 'OnFailure',
      volumes: [{ name: 'state', emptyDir: {} }],
      containers: [
        {
          name: 'main',
          image: 'bash',
          command: [
            'bash',
            '-c',
            'if [ -f /state/ran ]; then echo second; exit 0; fi; touch /state/ran; echo first; exit 3',
          ],
          volumeMounts: [{ name: 'state', mountPath: '/state' }],
        },
      ],
    });
    const pod = await podDone(ns, 'flaky');
    assert.equal(pod.status?.phase, 'Succeeded');
    assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 1);
    assert.equal(
      (await admin().getText(`/api/v1/namespaces/${ns}/pods/flaky/log`, { previous: true })).trim(),
      'first',
    );
    assert.equal((await logOf(ns, 'flaky')).trim(), 'second');
  });

  it('refuses an image it cannot run with a clear container status reason', async () => {
    await createPod(ns, 'nginx', { containers: [{ name: 'main', image: 'nginx:1.27' }] });
    const state = await eventually('ImageNotRunnable', async () => {
      const p = await admin().get<PodObj>(`/api/v1/namespaces/${ns}/pods/nginx`);
      const w = p.status?.containerStatuses?.[0]?.state.waiting;
      return w?.reason === 'ImageNotRunnable' ? w : undefined;
    });
    assert.match(state.message ?? '', /image nginx:1\.27 cannot be run by the kruntimes node agent/);
  });

  it('reports a missing Secret as CreateContainerConfigError', async () => {
    await createPod(ns, 'nosecret', {
      containers: [
        {
          name: 'main',
          image: 'bash',
          command: ['true'],
          env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'absent', key: 'k' } } }],
        },
      ],
    });
    const state = await eventually('CreateContainerConfigError', async () => {
      const p = await admin().get<PodObj>(`/api/v1/namespaces/${ns}/pods/nosecret`);
      const w = p.status?.containerStatuses?.[0]?.state.waiting;
      return w?.reason === 'CreateContainerConfigError' ? w : undefined;
    });
    assert.match(state.message ?? '', /secret "absent" not found/);
  });
});
