/**
 * Sessions through API aggregation (sessions.kruntimes.io) and krt session: a session Run goes
 * Ready, operations run interactive commands with stdin/stdout/stderr and return their exit
 * code, RBAC on runs/session is enforced by the API server, runtimed's session port refuses
 * anyone but the extension server, and the session ends on cancel, idle and timeout.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { isApiError } from '../lib/kube/errors.ts';
import { PROTOCOL } from '../lib/session/channel.ts';
import { cluster, E2E_ROOT } from './cluster.ts';
import { admin, apiServiceAvailable, deleteNamespace, eventually, newNamespace } from './helpers.ts';
import { grant, krt, saKubeconfig } from './krt.ts';
import { bashRuntime, cond, createRun, createRuntime, finished, GROUP, phase, runtimePods } from './runs-helpers.ts';

const SESSION = (ns: string, run: string): string =>
  `/apis/sessions.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/session`;

describe('Sessions through the aggregated API and krt session', function () {
  let ns: string;
  let operator: string;
  before(async () => {
    ns = await newNamespace('sessions');
    await createRuntime(ns, 'bash', bashRuntime({ replicas: 1, capacity: { resources: { runs: '4' } } }));
    await runtimePods(ns, 'bash', 1);
    await apiServiceAvailable('sessions.kruntimes.io');
    await grant(
      ns,
      'operator',
      'operator',
      { apiGroups: ['sessions.kruntimes.io'], resources: ['runs/session'], verbs: ['get', 'create'] },
      { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get'] },
    );
    await grant(ns, 'viewer', 'viewer', { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get'] });
    operator = await saKubeconfig(ns, 'operator');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('serves discovery with runs/session', async () => {
    const list = await admin().get<{ metadata: object; resources: { name: string; verbs: string[] }[] }>(
      '/apis/sessions.kruntimes.io/v1alpha1',
    );
    assert.deepEqual(list.resources.find((r) => r.name === 'runs/session')?.verbs, ['create', 'get']);
  });

  it('a session Run goes Ready and runs interactive commands with stdin, stdout, stderr and exit codes', async () => {
    await createRun(
      ns,
      { runtime: 'bash', mode: { session: {} }, env: [{ name: 'TEAM', value: 'platform' }] },
      { name: 'shell' },
    );
    const ready = await phase(ns, 'shell', 'Ready');
    assert.equal(cond(ready, 'Ready')?.status, 'True');
    assert.equal(cond(ready, 'Ready')?.reason, 'SessionReady');

    // The default command is the Runtime's shell reading stdin; input arrives in pieces.
    const sh = await krt(
      ['session', 'shell'],
      operator,
      ['echo "hello $TEAM"\n', 'echo to-stderr >&2\n', 'touch marker; exit 3\n'],
      100,
    );
    assert.equal(sh.code, 3, sh.stderr);
    assert.equal(sh.stdout, 'hello platform\n');
    assert.equal(sh.stderr, 'to-stderr\n');

    // A second operation on the same session sees the same working directory; a command after -- replaces the default.
    const ls = await krt(
      ['session', 'shell', '--', 'sh', '-c', 'read line; ls marker; echo "got $line"'],
      operator,
      'interactive input\n',
    );
    assert.equal(ls.code, 0, ls.stderr);
    assert.equal(ls.stdout, 'marker\ngot interactive input\n');

    const still = await admin().get<{ metadata: object; status?: { phase?: string } }>(
      `${GROUP}/namespaces/${ns}/runs/shell`,
    );
    assert.equal(still.status?.phase, 'Ready', 'operations do not end the session');
  });

  it('runs on a terminal with -t: a pseudo-terminal whose size follows resize frames', async () => {
    const tty = await krt(['session', 'shell', '-t', '--', 'sh', '-c', 'tty; stty size; exit 2'], operator);
    assert.equal(tty.code, 2, tty.stderr);
    assert.match(tty.stdout, /^\/dev\/pts\/\d+\r?$/m);
    assert.match(tty.stdout, /^24 80\r?$/m, 'the default size without a local terminal');

    const ws = await admin().websocket(
      SESSION(ns, 'shell'),
      [PROTOCOL],
      [
        ['command', 'sh'],
        ['command', '-c'],
        ['command', 'echo ready; read x; stty size; exit 9'],
        ['tty', 'true'],
      ],
    );
    let out = '';
    let status = '';
    await new Promise<void>((resolve) => {
      ws.on('message', (m: Buffer) => {
        if (m[0] === 3) {
          status = m.subarray(1).toString();
          return;
        }
        out += m.subarray(1).toString();
        if (out.includes('ready') && !out.includes('go')) {
          ws.send(Buffer.concat([Buffer.from([4]), Buffer.from(JSON.stringify({ Width: 120, Height: 40 }))]));
          ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('go\n')]));
        }
      });
      ws.on('close', () => resolve());
    });
    assert.match(out, /^40 120\r?$/m);
    assert.match(status, /"ExitCode","message":"9"/);
  });

  it('the API server refuses a caller without runs/session, and the backend refuses non-session Runs', async () => {
    const viewer = await krt(['session', 'shell', '--', 'true'], await saKubeconfig(ns, 'viewer'));
    assert.equal(viewer.code, 1);
    assert.match(viewer.stderr, /cannot get resource "runs\/session" in API group "sessions.kruntimes.io"/);

    await createRun(ns, { runtime: 'bash', source: { inline: 'echo task' } }, { name: 'task' });
    await finished(ns, 'task');
    await assert.rejects(admin().websocket(SESSION(ns, 'task'), [PROTOCOL]), (err: unknown) => {
      assert.ok(isApiError(err, 400), String(err));
      assert.match(err.message, /not a session Run/);
      return true;
    });
    await assert.rejects(admin().websocket(SESSION(ns, 'missing'), [PROTOCOL]), (err: unknown) => isApiError(err, 404));
    // Any other upgrade path gets a Status that says where sessions are, not a bare 404.
    await assert.rejects(admin().websocket(`${SESSION(ns, 'task')}s`, [PROTOCOL]), (err: unknown) => {
      assert.ok(isApiError(err, 404), String(err));
      assert.match(err.message, /sessions are at \/apis\/sessions\.kruntimes\.io/);
      return true;
    });
  });

  it("runtimed's session port refuses callers other than the extension server", async () => {
    const pods = await runtimePods(ns, 'bash', 1);
    const pod = pods[0];
    const c = pod?.status as { conditions?: { type: string; message?: string }[]; podIP?: string } | undefined;
    const published = c?.conditions?.find((x) => x.type === 'kruntimes.io/SessionServer')?.message ?? '';
    const port = /port=(\d+)/.exec(published)?.[1];
    assert.ok(port && c?.podIP, `the Pod publishes its session port: ${published}`);
    const shell = await admin().get<{ metadata: { uid?: string } }>(`${GROUP}/namespaces/${ns}/runs/shell`);
    // A token of another ServiceAccount for the sessions audience is not enough.
    const tok = await admin().create<{ metadata: object; status: { token: string } }>(
      `/api/v1/namespaces/${ns}/serviceaccounts/operator/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { audiences: ['sessions.kruntimes.io'], expirationSeconds: 600 },
      },
    );
    for (const headers of [{}, { Authorization: `Bearer ${tok.status.token}` }]) {
      const code = await new Promise<number>((resolve) => {
        const ws = new WebSocket(`wss://${c.podIP}:${port}/v1/sessions/${shell.metadata.uid}`, [PROTOCOL], {
          headers,
          rejectUnauthorized: false,
        });
        ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => {
          ws.close();
          resolve(101);
        });
        ws.once('error', () => resolve(-1));
      });
      assert.equal(code, 401);
    }
  });

  it("the aggregated backend acts as its own narrow ServiceAccount, not with the functions' permissions", async () => {
    const can = async (user: string, attrs: Record<string, string>): Promise<boolean> => {
      const r = await admin().create<{ metadata: object; status?: { allowed?: boolean } }>(
        '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user,
            groups: ['system:serviceaccounts', 'system:serviceaccounts:kruntimes-system'],
            resourceAttributes: { namespace: ns, ...attrs },
          },
        },
      );
      return r.status?.allowed === true;
    };
    const backend = 'system:serviceaccount:kruntimes-system:kruntimes-run-extension-api';
    assert.equal(await can(backend, { resource: 'pods', subresource: 'log', verb: 'get' }), true);
    assert.equal(await can(backend, { group: 'kruntimes.io', resource: 'runs', verb: 'get' }), true);
    const deniedAttrs: Record<string, string>[] = [
      { group: 'kruntimes.io', resource: 'runs', subresource: 'status', verb: 'patch' },
      { group: 'kruntimes.io', resource: 'runs', verb: 'create' },
      { resource: 'pods', verb: 'delete' },
      { resource: 'pods', subresource: 'exec', verb: 'create' },
      { resource: 'secrets', verb: 'list' },
      { resource: 'secrets', verb: 'get' },
    ];
    for (const denied of deniedAttrs) assert.equal(await can(backend, denied), false, JSON.stringify(denied));
    // A function's identity (the scheduler's, which the relay impersonates) may do what the
    // backend may not (so the split is real).
    assert.equal(
      await can('system:serviceaccount:kruntimes-system:kruntimes-fn-run-scheduler', {
        group: 'kruntimes.io',
        resource: 'runs',
        subresource: 'status',
        verb: 'patch',
      }),
      true,
    );
  });

  it("the Runtime's NetworkPolicy admits only the extension server on the session port (and anyone on the gateway's)", async () => {
    const np = await admin().get<{
      metadata: object;
      spec: { policyTypes: string[]; ingress: { from: object[]; ports: { port: number }[] }[] };
    }>(`/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies/runtime-bash`);
    assert.deepEqual(np.spec.policyTypes, ['Ingress']);
    // The second rule is the Runtime Gateway's port, where every call is authorised with the
    // caller's own token (ADR 0017): no source restriction.
    assert.equal(np.spec.ingress.length, 2);
    assert.deepEqual(np.spec.ingress[1], { ports: [{ protocol: 'TCP', port: 9096 }] });
    assert.deepEqual(np.spec.ingress[0]?.from, [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kruntimes-system' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kruntimes-extension' } },
      },
    ]);
    assert.deepEqual(
      np.spec.ingress[0]?.ports.map((p) => p.port),
      [9095],
    );
  });

  it('a session survives a runtimed restart: still Ready, and new operations work against the new session port', async () => {
    const run = await admin().get<{ metadata: object; status?: { assignedPod?: string } }>(
      `${GROUP}/namespaces/${ns}/runs/shell`,
    );
    const pod = await admin().get<{ metadata: { uid?: string }; spec: { nodeName: string } }>(
      `/api/v1/namespaces/${ns}/pods/${run.status?.assignedPod}`,
    );
    const pidFile = join(E2E_ROOT, 'nodes', pod.spec.nodeName, 'pods', pod.metadata.uid ?? '', 'pids', 'runtimed');
    const before = readFileSync(pidFile, 'utf8').trim();
    process.kill(Number(before), 'SIGKILL');
    await eventually(
      'runtimed restarted',
      () => {
        try {
          return Promise.resolve(readFileSync(pidFile, 'utf8').trim() !== before);
        } catch {
          return Promise.resolve(false);
        }
      },
      30_000,
    );
    const r = await eventually(
      'an operation after the restart',
      async () => {
        const res = await krt(['session', 'shell', '--', 'sh', '-c', 'ls marker && exit 5'], operator);
        return res.code === 5 ? res : undefined;
      },
      30_000,
      500,
    );
    assert.equal(r.stdout, 'marker\n');
    const still = await admin().get<{ metadata: object; status?: { phase?: string } }>(
      `${GROUP}/namespaces/${ns}/runs/shell`,
    );
    assert.equal(still.status?.phase, 'Ready');
  });

  it('limits concurrent operations per session (429 with a clear message), and frees the slot when one ends', async () => {
    const open = [];
    for (let i = 0; i < 16; i++)
      open.push(
        await admin().websocket(
          SESSION(ns, 'shell'),
          [PROTOCOL],
          [
            ['command', 'sleep'],
            ['command', '60'],
          ],
        ),
      );
    await assert.rejects(admin().websocket(SESSION(ns, 'shell'), [PROTOCOL], [['command', 'true']]), (err: unknown) => {
      assert.ok(isApiError(err, 429), String(err));
      assert.match(err.message, /already has 16 operations \(at most 16\)/);
      return true;
    });
    const first = open.shift();
    await new Promise<void>((resolve) => {
      first?.once('close', () => resolve());
      first?.close();
    });
    const again = await eventually(
      'a free operation slot',
      async () => {
        const r = await krt(['session', 'shell', '--', 'true'], operator);
        return r.code === 0 ? r : undefined;
      },
      20_000,
      200,
    );
    assert.equal(again.code, 0);
    for (const ws of open) ws.terminate();
  });

  it('cancel ends the session and the operations in it; later operations get a clear 409', async () => {
    await createRun(ns, { runtime: 'bash', mode: { session: { command: ['bash'] } } }, { name: 'cancelme' });
    await phase(ns, 'cancelme', 'Ready');
    const long = krt(['session', 'cancelme', '--', 'sleep', '300'], operator);
    await new Promise((r) => setTimeout(r, 1000));
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/cancelme`, { spec: { cancelRequested: true } });
    const r = await finished(ns, 'cancelme');
    assert.equal(r.status?.phase, 'Cancelled');
    assert.equal(cond(r, 'Ready')?.status, 'False');
    const ended = await long;
    assert.notEqual(ended.code, 0, 'the running operation ended with the session');
    await assert.rejects(
      admin().websocket(SESSION(ns, 'cancelme'), [PROTOCOL]),
      (err: unknown) => isApiError(err, 409) && /has ended/.test(err.message),
    );
    const again = await krt(['session', 'cancelme', '-n', ns], cluster().kubeconfig);
    assert.equal(again.code, 3, again.stderr);
  });

  it('an idle session ends Succeeded with SessionIdle; a timeout ends it as Timeout', async () => {
    await createRun(ns, { runtime: 'bash', mode: { session: { idleTimeoutSeconds: 2 } } }, { name: 'idle' });
    await createRun(ns, { runtime: 'bash', mode: { session: {} }, timeout: '2s' }, { name: 'short' });
    const idle = await finished(ns, 'idle', 30_000);
    assert.equal(idle.status?.phase, 'Succeeded');
    assert.equal(cond(idle, 'Completed')?.reason, 'SessionIdle');
    const short = await finished(ns, 'short', 30_000);
    assert.equal(short.status?.phase, 'Timeout');
  });
});
