/**
 * Attack specs for issue 11, items 1, 3, 10 and 12 (credentials): each attack is performed from
 * inside a Run (its inline script) or as a weak user, and must fail. Items 1 and 12 also try the
 * credentials an attacker could have stolen (runtimed's token, an unbound session token).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { KubeClient, PatchType } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { PROTOCOL } from '../../lib/session/channel.ts';
import { podAudience } from '../../lib/session/relay.ts';
import { REPO_ROOT } from '../../localenv/paths.ts';
import { cluster, E2E_NODE_KIND } from '../cluster.ts';
import { admin, apiServiceAvailable, deleteNamespace, eventually, newNamespace } from '../helpers.ts';
import { grant, krt, saKubeconfig } from '../krt.ts';
import { bashRuntime, createRun, createRuntime, finished, phase, runtimePods } from '../runs-helpers.ts';

type Pod = KubeObject & {
  spec: { nodeName?: string; containers: { name: string; volumeMounts?: { mountPath: string }[] }[] };
  status?: {
    podIP?: string;
    conditions?: { type: string; status: string; message?: string }[];
    containerStatuses?: { name: string; state?: { waiting?: { reason?: string; message?: string } } }[];
  };
};

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** A Run's script: find a ServiceAccount token and use it to move the Pod's address (podIP). */
const STEAL_TOKEN = `
tok=${SA_DIR}/token
if [ ! -r "$tok" ]; then echo "token=absent" >> "$KRUNTIME_OUTPUTS"; exit 0; fi
echo "token=readable" >> "$KRUNTIME_OUTPUTS"
NODE_TLS_REJECT_UNAUTHORIZED=0 node -e '
const t = require("fs").readFileSync(process.argv[1], "utf8");
const k = JSON.parse(Buffer.from(t.split(".")[1], "base64url").toString())["kubernetes.io"];
fetch(process.env.API + "/api/v1/namespaces/" + k.namespace + "/pods/" + k.pod.name + "/status", {
  method: "PATCH",
  headers: { Authorization: "Bearer " + t, "Content-Type": "application/strategic-merge-patch+json" },
  body: JSON.stringify({ status: { podIP: "127.0.0.66" } }),
}).then((r) => console.log(r.status));
' "$tok" | sed 's/^/patch=/' >> "$KRUNTIME_OUTPUTS"
`;

/** A Run's script: send a forged AdmissionReview straight to the extension server's webhook. */
const FORGE_ADMISSION = `
NODE_TLS_REJECT_UNAUTHORIZED=0 node -e '
fetch(process.env.WEBHOOK, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {
    uid: "forged", kind: { group: "kruntimes.io", version: "v1alpha1", kind: "Run" },
    resource: { group: "kruntimes.io", version: "v1alpha1", resource: "runs" }, operation: "CREATE",
    namespace: "x", name: "x", userInfo: { username: "system:admin", groups: ["system:masters"] },
    object: { apiVersion: "kruntimes.io/v1alpha1", kind: "Run", metadata: { name: "x" }, spec: {} } } }),
}).then((r) => console.log(r.status), (e) => console.log("error " + e.message));
' | sed 's/^/status=/' >> "$KRUNTIME_OUTPUTS"
`;

/**
 * A Run's script: reach runtimed's token, environment and working directory through /proc (and the
 * node's own key directory), as a Run could when every container ran as root in one PID namespace.
 */
const THROUGH_PROC = `
token=0; env=0; cwd=0
for d in /proc/[0-9]*; do
  # /var/run is a link to /run: an absolute link resolves in the reader's root, so try both.
  for t in "$d/root${SA_DIR}/token" "$d/root${SA_DIR.replace('/var/run', '/run')}/token"; do
    cat "$t" >/dev/null 2>&1 && token=$((token+1))
  done
  case "$(tr '\\0' ' ' < "$d/cmdline" 2>/dev/null)" in *kruntimes.ts\\ runtimed*) ;; *) continue ;; esac
  grep -qa KRT_SESSION_PORT= "$d/environ" 2>/dev/null && env=$((env+1))
  ls "$d/cwd/" >/dev/null 2>&1 && cwd=$((cwd+1))
done
hostkeys=0; ls "$HOSTROOT/pki" >/dev/null 2>&1 && hostkeys=1
printf 'uid=%s\\ntoken=%s\\nenviron=%s\\ncwd=%s\\nhostkeys=%s\\n' "$(id -u)" $token $env $cwd $hostkeys >> "$KRUNTIME_OUTPUTS"
`;

/**
 * A Run's script: replace the Runtime Server's socket with its own listener (putting the original
 * back, so the Pod keeps working when the attack succeeds), at the old and the current path.
 */
const REPLACE_SOCKET = `
n=0; visible=0
for p in /workspace/.kruntimes/runtime.sock /run/kruntimes/runtime.sock; do
  [ -S "$p" ] || continue
  visible=$((visible+1))
  if python3 -c 'import os, socket, sys; p = sys.argv[1]; os.rename(p, p + ".orig"); socket.socket(socket.AF_UNIX).bind(p)' "$p" 2>/dev/null; then
    n=$((n+1)); mv -f "$p.orig" "$p"
  fi
done
printf 'visible=%s\\nreplaced=%s\\n' $visible $n >> "$KRUNTIME_OUTPUTS"
`;

/**
 * Where a Run reaches the extension server's webhooks: on the node agent every Pod listens on the
 * host's loopback; on a real kubelet the server listens on its Pod IP, which a Run's Pod reaches
 * across the Pod network (127.0.0.1 there is the Run's own Pod).
 */
async function webhookAddress(port: number): Promise<string> {
  if (E2E_NODE_KIND !== 'kubelet') return `127.0.0.1:${port}`;
  const pods = await admin().list<Pod>('/api/v1/namespaces/kruntimes-system/pods', {
    labelSelector: 'app.kubernetes.io/name=kruntimes-extension',
  });
  const ip = pods.items.find((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
    ?.status?.podIP;
  assert.ok(ip, 'a ready extension server Pod');
  return `${ip}:${port}`;
}

/** Opens runtimed's session port with a bearer token: 401 refused, 409 accepted (no such session), -1 no connection. */
function sessionPort(pod: Pod, port: number, token: string): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`wss://${pod.status?.podIP}:${port}/v1/sessions/no-such-run`, [PROTOCOL], {
      headers: { Authorization: `Bearer ${token}` },
      rejectUnauthorized: false,
    });
    ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('error', () => resolve(-1));
  });
}

async function tokenFor(ns: string, sa: string, spec: Record<string, unknown>): Promise<string> {
  const res = await admin().create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec },
  );
  return res.status.token;
}

describe('Security: a Run holds no platform credential (issue 11: 1, 3, 10, 12)', function () {
  let ns: string;
  let pod: Pod;
  before(async () => {
    ns = await newNamespace('sec-cred');
    await createRuntime(ns, 'bash', bashRuntime({ replicas: 1, capacity: { resources: { runs: '4' } } }));
    pod = (await runtimePods(ns, 'bash', 1))[0] as Pod;
    await apiServiceAvailable('sessions.kruntimes.io');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it("1a: a Run cannot read runtimed's ServiceAccount token, so it cannot patch its Pod's status", async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: STEAL_TOKEN }, env: [{ name: 'API', value: cluster().server }] },
      { name: 'steal-token' },
    );
    const r = await finished(ns, 'steal-token');
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.deepEqual(r.status?.outputs, { token: 'absent' }, JSON.stringify(r.status?.outputs));
    const fresh = await admin().get<Pod>(`/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`);
    assert.equal(fresh.status?.podIP, pod.status?.podIP);
    const runtime = fresh.spec.containers.find((c) => c.name === 'runtime');
    assert.ok(!runtime?.volumeMounts?.some((m) => m.mountPath.startsWith(SA_DIR)), 'no token mount in the runtime');
  });

  it("1d: a Run runs as its image's user and cannot reach runtimed's token, environment or cwd through /proc", async () => {
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: THROUGH_PROC },
        env: [{ name: 'HOSTROOT', value: cluster().state.root }],
      },
      { name: 'through-proc' },
    );
    const r = await finished(ns, 'through-proc');
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.deepEqual(
      r.status?.outputs,
      { uid: '1000', token: '0', environ: '0', cwd: '0', hostkeys: '0' },
      JSON.stringify(r.status?.outputs),
    );
  });

  it("1b: runtimed's token (if stolen) may write only runtimed's own conditions, never podIP or others", async () => {
    const stolen = await tokenFor(ns, 'kruntimes-runtimed', {
      expirationSeconds: 600,
      boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid },
    });
    const asRuntimed = new KubeClient({
      server: cluster().server,
      ca: readFileSync(join(cluster().state.root, 'pki', 'ca.crt')),
      token: stolen,
    });
    const path = `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/status`;
    const refused = async (status: object): Promise<string> => {
      const err = await asRuntimed.patch(path, { status }, PatchType.strategic).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      assert.ok(err, `the patch ${JSON.stringify(status)} must be refused`);
      return err.message;
    };
    assert.match(await refused({ podIP: '127.0.0.66' }), /may not change its Pod's addresses/);
    assert.match(await refused({ conditions: [{ type: 'Ready', status: 'False' }] }), /only write its own conditions/);
    // Its own heartbeat condition stays writable (runtimed needs it).
    await asRuntimed.patch(
      path,
      { status: { conditions: [{ type: 'kruntimes.io/RuntimedReady', status: 'True', reason: 'Heartbeat' }] } },
      PatchType.strategic,
    );
  });

  it('1c: runtimed accepts only a session token minted for its own Pod, once', async () => {
    const port = 9095;
    // The extension server's identity, but not bound to this Pod (what the old code cached and sent to every Pod).
    const unbound = await tokenFor('kruntimes-system', 'kruntimes-run-extension-api', {
      audiences: ['sessions.kruntimes.io'],
      expirationSeconds: 600,
    });
    assert.equal(await sessionPort(pod, port, unbound), 401, 'a token not bound to this Pod');
    const otherPod = await tokenFor('kruntimes-system', 'kruntimes-run-extension-api', {
      audiences: [podAudience('00000000-0000-4000-8000-000000000000')],
      expirationSeconds: 600,
    });
    assert.equal(await sessionPort(pod, port, otherPod), 401, 'a token minted for another Pod');
    const bound = await tokenFor('kruntimes-system', 'kruntimes-run-extension-api', {
      audiences: [podAudience(pod.metadata.uid ?? '')],
      expirationSeconds: 600,
    });
    assert.equal(await sessionPort(pod, port, bound), 409, 'the bound token is accepted (no such session)');
    assert.equal(await sessionPort(pod, port, bound), 401, 'and refused when replayed');
    const long = await tokenFor('kruntimes-system', 'kruntimes-run-extension-api', {
      audiences: [podAudience(pod.metadata.uid ?? '')],
      expirationSeconds: 7200,
    });
    assert.equal(await sessionPort(pod, port, long), 401, 'a long-lived token');
  });

  it('3: a user with only get on runs and runs/session cannot open a session', async () => {
    await grant(
      ns,
      'auditor',
      'auditor',
      { apiGroups: ['sessions.kruntimes.io'], resources: ['runs/session'], verbs: ['get'] },
      { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get'] },
    );
    await grant(
      ns,
      'operator',
      'operator',
      { apiGroups: ['sessions.kruntimes.io'], resources: ['runs/session'], verbs: ['get', 'create'] },
      { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get'] },
    );
    await createRun(ns, { runtime: 'bash', mode: { session: {} } }, { name: 'shell' });
    await phase(ns, 'shell', 'Ready');
    const auditor = await krt(
      ['session', 'shell', '--', 'sh', '-c', 'id -u; exit 5'],
      await saKubeconfig(ns, 'auditor'),
    );
    assert.notEqual(auditor.code, 5, `the auditor ran a command: ${auditor.stdout}`);
    assert.match(auditor.stderr, /cannot create resource "runs\/session" in API group "sessions.kruntimes.io"/);
    const operator = await krt(['session', 'shell', '--', 'sh', '-c', 'exit 5'], await saKubeconfig(ns, 'operator'));
    assert.equal(operator.code, 5, operator.stderr);
  });

  it('10: images declare non-root users, and the node refuses runAsNonRoot with a root image', async () => {
    for (const image of ['kruntimes', 'bash-runtime', 'python-runtime']) {
      const docker = readFileSync(join(REPO_ROOT, 'images', image, 'Dockerfile'), 'utf8');
      const user = /^USER\s+(\S+)\s*$/m.exec(docker)?.[1] ?? '';
      assert.match(user, /^[1-9]\d*(:\d+)?$/, `${image}: Dockerfile USER ${user}`);
      const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'images', image, 'image.json'), 'utf8')) as {
        user?: string;
      };
      assert.equal(manifest.user, user, `${image}: image.json mirrors the Dockerfile's USER`);
    }
    const podSpec = (name: string, image: string): object => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        containers: [{ name: 'c', image, command: ['sleep', '600'], securityContext: { runAsNonRoot: true } }],
      },
    });
    await admin().create(`/api/v1/namespaces/${ns}/pods`, podSpec('root-image', 'docker.io/library/bash:5'));
    await admin().create(`/api/v1/namespaces/${ns}/pods`, podSpec('nonroot-image', 'ghcr.io/kruntimes/kruntimes:dev'));
    const waiting = await eventually(
      'the root image to be refused',
      async () => {
        const p = await admin().get<Pod>(`/api/v1/namespaces/${ns}/pods/root-image`);
        const w = p.status?.containerStatuses?.[0]?.state?.waiting;
        return w?.reason === 'CreateContainerConfigError' ? w : undefined;
      },
      60_000,
    );
    assert.match(waiting.message ?? '', /container has runAsNonRoot and image will run as root/);
    await eventually(
      'the non-root image to start',
      async () => {
        const p = await admin().get<Pod & { status?: { phase?: string } }>(
          `/api/v1/namespaces/${ns}/pods/nonroot-image`,
        );
        return p.status?.phase === 'Running' || p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';
      },
      60_000,
    );
    // runtimed itself (runAsNonRoot) runs: the Runtime Pod above is Ready.
    assert.ok(pod.status?.conditions?.some((c) => c.type === 'kruntimes.io/RuntimedReady' && c.status === 'True'));
  });

  it('12: a Run cannot call the admission webhooks directly (the API server client certificate is required)', async () => {
    const port = cluster().state.ports.extension;
    assert.ok(port, 'the extension server port');
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: FORGE_ADMISSION },
        env: [{ name: 'WEBHOOK', value: `https://${await webhookAddress(port)}/admission/run-workspace-use` }],
      },
      { name: 'forge-admission' },
    );
    const r = await finished(ns, 'forge-admission');
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.deepEqual(r.status?.outputs, { status: '401' }, JSON.stringify(r.status?.outputs));
    // The API server's own webhook calls still reach the function (it presents the certificate):
    // a Run naming a missing workspace is judged by run-workspace-use, not refused at the door.
    await assert.rejects(
      createRun(ns, { runtime: 'bash', source: { inline: 'true' }, workspace: { name: 'nope' } }, { name: 'ws-run' }),
      /PersistentWorkspace "nope" does not exist/,
    );
  });

  it("d: a Run can neither replace nor plant the Runtime Server's socket (runtimed listens in its own directory)", async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: REPLACE_SOCKET } }, { name: 'replace-socket' });
    const r = await finished(ns, 'replace-socket');
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.deepEqual(r.status?.outputs, { visible: '1', replaced: '0' }, JSON.stringify(r.status?.outputs));
    await createRun(ns, { runtime: 'bash', source: { inline: 'echo ok=1 >> "$KRUNTIME_OUTPUTS"' } }, { name: 'after' });
    assert.deepEqual((await finished(ns, 'after')).status?.outputs, { ok: '1' });
  });
});
