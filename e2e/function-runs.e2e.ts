/**
 * Function-mode Runs (issue 15) on the real local cluster: the lifecycle to Ready (Scheduled,
 * Running, then Ready with FunctionRegistered, status.endpoint, finalizer), calls of bash and
 * python handlers through the Runtime Gateway (python stays warm: one import, one process), RBAC
 * at the gateway both ways, 429 for a concurrent call, cancel with a call in flight, 404 for the
 * old UID after the Run was recreated, registration retry then Failed, Pod loss (retried
 * elsewhere, or Failed and then deletable: the reaper drops the finalizer no runtimed is left to
 * drop), cancel before assignment, spec.timeout over the whole reservation, and the idle timeout.
 * Also a session Run's WebSocket operations through the same gateway (SDK and browser clients).
 */
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { isApiError } from '../lib/kube/errors.ts';
import { Channel, frame, PROTOCOL } from '../lib/session/channel.ts';
import { TOKEN_PROTOCOL_PREFIX } from '../runtimed/gateway.ts';
import { closeInvokeAgents, endpointOf, invokeEndpoint, InvokeError } from '../lib/invoke/client.ts';
import { deleteNamespace, eventually, newNamespace, serviceAccountClient, admin } from './helpers.ts';
import { grant, krt, saKubeconfig } from './krt.ts';
import {
  cond,
  createRun,
  createRuntime,
  example,
  finished,
  getRun,
  GROUP,
  phase,
  runEvent,
  runtimePods,
} from './runs-helpers.ts';

type Endpoint = { url: string; caBundle?: string };
const endpointIn = (r: { status?: object }): Endpoint | undefined => (r.status as { endpoint?: Endpoint }).endpoint;

const slowBash = (seconds: number): Record<string, unknown> => ({
  inlinePath: 'slow.sh',
  inline: `slow() { sleep ${seconds}; echo '"slept"'; }\n`,
});

/** One session operation through the gateway at `url` (wss): stdout, or the refusal's HTTP code. */
function operate(
  url: string,
  ca: Buffer,
  auth: { header?: string; subprotocol?: string },
  input: string,
): Promise<{ code: number; stdout: string }> {
  const protocols = [PROTOCOL, ...(auth.subprotocol ? [`${TOKEN_PROTOCOL_PREFIX}${auth.subprotocol}`] : [])];
  const headers = auth.header ? { Authorization: `Bearer ${auth.header}` } : {};
  return new Promise((resolve) => {
    const ws = new WebSocket(url, protocols, { headers, ca });
    let stdout = '';
    ws.on('unexpected-response', (_req, res) => resolve({ code: res.statusCode ?? 0, stdout }));
    ws.on('open', () => {
      ws.send(frame(Channel.Stdin, input));
      ws.send(Buffer.from([Channel.Close, Channel.Stdin]));
    });
    ws.on('message', (m: Buffer) => {
      if (m[0] === Channel.Stdout) stdout += m.subarray(1).toString('utf8');
    });
    ws.on('close', () => resolve({ code: 101, stdout }));
    ws.on('error', (err) => resolve({ code: 0, stdout: String(err) }));
  });
}

async function refused(p: Promise<unknown>): Promise<InvokeError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof InvokeError, `expected a refused call, got ${String(err)}`);
  return err;
}

describe('Function-mode Runs through the Runtime Gateway', function () {
  let ns: string;
  let caller: string;
  let stranger: string;
  let callerKubeconfig: string;
  before(async () => {
    ns = await newNamespace('fnruns');
    const bash = example('examples/runtimes/bash.yaml') as { spec: Record<string, unknown> };
    const python = example('examples/runtimes/python.yaml') as { spec: Record<string, unknown> };
    await createRuntime(ns, 'bash', { ...bash.spec, replicas: 1, capacity: { resources: { runs: '6' } } });
    await createRuntime(ns, 'python', { ...python.spec, replicas: 1, capacity: { resources: { runs: '2' } } });
    await grant(ns, 'caller', 'caller', { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get'] });
    await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'stranger' },
    });
    callerKubeconfig = await saKubeconfig(ns, 'caller');
    await saKubeconfig(ns, 'operator');
    await grant(ns, 'operator', 'operator', {
      apiGroups: ['sessions.kruntimes.io'],
      resources: ['runs/session'],
      verbs: ['create'],
    });
    caller = (await serviceAccountClient(ns, 'caller')).bearerToken() ?? '';
    stranger = (await serviceAccountClient(ns, 'stranger')).bearerToken() ?? '';
    // Started first, checked last: ends on its own after 2 s without a call.
    await createRun(
      ns,
      { runtime: 'bash', mode: { function: { handler: 'slow.slow', idleTimeoutSeconds: 2 } }, source: slowBash(0) },
      { name: 'idle' },
    );
    await runtimePods(ns, 'bash', 1);
    await runtimePods(ns, 'python', 1);
  });
  after(async () => {
    closeInvokeAgents();
    await deleteNamespace(ns);
  });

  it('a bash function goes Scheduled, Running, then Ready with FunctionRegistered, an endpoint and its finalizer', async () => {
    await admin().create(`${GROUP}/namespaces/${ns}/runs`, example('examples/functions/bash-greet.yaml'));
    const ready = await phase(ns, 'greet-bash', 'Ready');
    assert.equal(cond(ready, 'Ready')?.reason, 'FunctionRegistered');
    // Pending -> Scheduled -> Running -> Ready: each step's condition is True, set in that order.
    const conditions = (ready.status?.conditions ?? []) as {
      type: string;
      status: string;
      lastTransitionTime?: string;
    }[];
    const at = (type: string): string =>
      conditions.find((c) => c.type === type && c.status === 'True')?.lastTransitionTime ?? '';
    const steps = ['Scheduled', 'Running', 'Ready'].map(at);
    assert.ok(steps.every(Boolean), JSON.stringify(conditions));
    assert.deepEqual([...steps].sort(), steps);
    assert.deepEqual([cond(ready, 'Scheduled')?.reason, cond(ready, 'Running')?.reason], ['Assigned', 'Claimed']);
    assert.match(endpointIn(ready)?.url ?? '', /^https:\/\/.+\/invoke$/);
    assert.ok(ready.metadata.finalizers?.includes('kruntimes.io/function-cleanup'));
    const ep = await endpointOf(admin(), ns, 'greet-bash');
    const r = await invokeEndpoint(ep, caller, { name: 'Ada' });
    assert.deepEqual(r.output, { greeting: 'hello Ada' });
    assert.match(r.invocationId, /^[0-9a-f-]{36}$/);
  });

  it('authorises at the gateway with the caller token: get on the Run is needed (403 without, 401 for a bad token)', async () => {
    const ep = await endpointOf(admin(), ns, 'greet-bash');
    assert.equal((await refused(invokeEndpoint(ep, stranger, {}))).code, 403);
    assert.equal((await refused(invokeEndpoint(ep, 'not-a-token', {}))).code, 401);
    assert.deepEqual((await invokeEndpoint(ep, caller, {})).output, { greeting: 'hello world' });
  });

  it('serves a session Run over WebSocket through the gateway: create on runs/session needed (header or browser subprotocol token)', async () => {
    const shell = await createRun(ns, { runtime: 'bash', mode: { session: {} } }, { name: 'shell' });
    await phase(ns, 'shell', 'Ready');
    // The bash Runtime has one Pod: the session Run is behind the same gateway as greet-bash.
    const ep = await endpointOf(admin(), ns, 'greet-bash');
    const url = `wss://${new URL(ep.url).host}/v1/namespaces/${ns}/runs/shell/${shell.metadata.uid}/session`;
    const ca = Buffer.from(ep.caBundle ?? '', 'base64');
    const operator = (await serviceAccountClient(ns, 'operator')).bearerToken() ?? '';
    const byHeader = await operate(url, ca, { header: operator }, 'echo $((6*7))\n');
    assert.deepEqual(byHeader, { code: 101, stdout: '42\n' });
    const browser = await operate(url, ca, { subprotocol: Buffer.from(operator).toString('base64url') }, 'echo hi\n');
    assert.deepEqual(browser, { code: 101, stdout: 'hi\n' });
    assert.equal((await operate(url, ca, { header: caller }, 'echo no\n')).code, 403); // get on runs is not enough
    assert.equal((await operate(url, ca, {}, '')).code, 401);
    assert.equal(
      (await operate(url.replace(shell.metadata.uid ?? '', 'other-uid'), ca, { header: operator }, '')).code,
      404,
    );
    // Its capacity slot goes back for the specs below.
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/shell`, { spec: { cancelRequested: true } });
  });

  it('a python function imports its module once and stays warm; a failing call leaves it Ready; krt invoke calls it', async () => {
    await admin().create(`${GROUP}/namespaces/${ns}/runs`, example('examples/functions/python-greet.yaml'));
    await phase(ns, 'greet-python', 'Ready');
    const ep = await endpointOf(admin(), ns, 'greet-python');
    const a = (await invokeEndpoint(ep, caller, { name: 'Ada' })).output as { calls: number; pid: number };
    const failed = await refused(invokeEndpoint(ep, caller, 'not-an-object'));
    assert.deepEqual([failed.code, failed.reason], [500, 'FunctionError']);
    assert.match(failed.message, /AttributeError/);
    const b = (await invokeEndpoint(ep, caller, { name: 'Bob' })).output as { calls: number; pid: number };
    assert.deepEqual([a.calls, b.calls, b.pid], [1, 3, a.pid]);
    assert.equal((await getRun(ns, 'greet-python')).status?.phase, 'Ready');
    const cli = await krt(['invoke', 'greet-python', '-d', '{"name":"Cy"}'], callerKubeconfig);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal((JSON.parse(cli.stdout) as { greeting: string; calls: number }).calls, 4);
  });

  it('answers 429 to a second call while one is in flight; cancel drains, then cancels the call', async () => {
    await createRun(
      ns,
      { runtime: 'bash', mode: { function: { handler: 'slow.slow' } }, source: slowBash(60) },
      { name: 'slow' },
    );
    await phase(ns, 'slow', 'Ready');
    const ep = await endpointOf(admin(), ns, 'slow');
    const first = invokeEndpoint(ep, caller, 1).then(
      () => undefined,
      (e: unknown) => e,
    );
    const busy = await eventually('a 429 for the second call', async () => {
      const e = await refused(invokeEndpoint(ep, caller, 2));
      return e.code === 429 ? e : undefined;
    });
    assert.equal(busy.reason, 'TooManyRequests');
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/slow`, { spec: { cancelRequested: true } });
    const done = await finished(ns, 'slow');
    assert.equal(done.status?.phase, 'Cancelled');
    const err = await first;
    assert.ok(err instanceof InvokeError && err.code === 503, `the in-flight call ended with ${String(err)}`);
    // The finalizer goes last, after the terminal status (the handler is unregistered by then).
    await eventually('the function-cleanup finalizer to be removed', async () =>
      (await getRun(ns, 'slow')).metadata.finalizers?.includes('kruntimes.io/function-cleanup') ? undefined : true,
    );
  });

  it('refuses the old UID with 404 after the Run was recreated with the same name', async () => {
    const old = await endpointOf(admin(), ns, 'greet-bash');
    await admin().delete(`${GROUP}/namespaces/${ns}/runs/greet-bash`);
    await eventually('greet-bash to be deleted', async () =>
      getRun(ns, 'greet-bash').then(
        () => false,
        () => true,
      ),
    );
    await admin().create(`${GROUP}/namespaces/${ns}/runs`, example('examples/functions/bash-greet.yaml'));
    await phase(ns, 'greet-bash', 'Ready');
    const e = await refused(invokeEndpoint(old, caller, {}));
    assert.equal(e.code, 404);
    assert.match(e.message, /recreated/);
    const fresh = await endpointOf(admin(), ns, 'greet-bash');
    assert.deepEqual((await invokeEndpoint(fresh, caller, { name: 'Ada' })).output, { greeting: 'hello Ada' });
  });

  it('retries a registration error per the retry policy, counting attempts, then fails', async () => {
    await createRun(
      ns,
      {
        runtime: 'bash',
        mode: { function: { handler: 'slow.missing' } },
        source: slowBash(0),
        retryPolicy: { maxAttempts: 2, backoff: '100ms' },
      },
      { name: 'unregistrable' },
    );
    const r = await finished(ns, 'unregistrable');
    assert.equal(r.status?.phase, 'Failed');
    assert.equal(cond(r, 'Ready')?.reason, 'FunctionRegistration');
    assert.equal(r.status?.attempt, 2);
    assert.match(r.status?.message ?? '', /no bash function "missing"/);
  });

  it('registers again after a registration error when the retry policy allows it: Ready at attempt 2', async () => {
    // The first sourcing defines no function (and leaves a marker); the second one defines it.
    const marker = `/tmp/krt-e2e-${ns}-flaky`;
    const inline = [
      `if [ -e ${marker} ]; then`,
      `  rm -f ${marker}`,
      `  flaky() { echo '"second"'; }`,
      'else',
      `  : >${marker}`,
      'fi',
      '',
    ].join('\n');
    await createRun(
      ns,
      {
        runtime: 'bash',
        mode: { function: { handler: 'flaky.flaky' } },
        source: { inlinePath: 'flaky.sh', inline },
        retryPolicy: { maxAttempts: 3, backoff: '100ms' },
      },
      { name: 'flaky' },
    );
    const ready = await phase(ns, 'flaky', 'Ready');
    assert.equal(ready.status?.attempt, 2);
    assert.equal(cond(ready, 'Ready')?.reason, 'FunctionRegistered');
    const event = await runEvent(ns, 'flaky', 'FunctionRegistration');
    assert.match(event.message, /registration attempt 1 failed: .*no bash function "flaky"/);
    assert.equal((await invokeEndpoint(await endpointOf(admin(), ns, 'flaky'), caller, 1)).output, 'second');
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/flaky`, { spec: { cancelRequested: true } });
    assert.equal((await finished(ns, 'flaky')).status?.phase, 'Cancelled');
  });

  it('after Pod loss: a Run with retries is Ready again on the new Pod with a new endpoint; one without fails without it', async () => {
    const python = example('examples/functions/python-greet.yaml') as { spec: Record<string, unknown> };
    await createRun(ns, { ...python.spec, retryPolicy: { maxAttempts: 3, backoff: '100ms' } }, { name: 'survivor' });
    const before = await phase(ns, 'survivor', 'Ready');
    const oldUrl = endpointIn(before)?.url;
    const [pod] = await runtimePods(ns, 'python', 1);
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${pod?.metadata.name}`, { gracePeriodSeconds: 0 });
    const again = await eventually(
      'survivor Ready on the new Pod',
      async () => {
        const r = await getRun(ns, 'survivor');
        return r.status?.phase === 'Ready' && r.status.assignedPod !== pod?.metadata.name ? r : undefined;
      },
      90_000,
      200,
    );
    assert.equal(again.status?.attempt, 2);
    assert.notEqual(endpointIn(again)?.url, oldUrl);
    const out = (await invokeEndpoint(await endpointOf(admin(), ns, 'survivor'), caller, { name: 'Di' })).output;
    assert.equal((out as { calls: number }).calls, 1);
    const lost = await finished(ns, 'greet-python');
    assert.equal(lost.status?.phase, 'Failed');
    assert.equal(cond(lost, 'Ready')?.reason, 'PodGone');
    assert.equal(endpointIn(lost), undefined);
    // No runtimed is left to drop its cleanup finalizer: the reaper does, so deleting does not hang.
    await admin().delete(`${GROUP}/namespaces/${ns}/runs/greet-python`);
    await eventually('the lost function Run to be deleted', () =>
      getRun(ns, 'greet-python').then(
        () => undefined,
        (err: unknown) => (isApiError(err, 404) ? true : undefined),
      ),
    );
  });

  it('cancelled before it was assigned: Cancelled, with no finalizer to remove and nothing registered', async () => {
    const spec = { runtime: 'nowhere', mode: { function: { handler: 'slow.slow' } }, source: slowBash(0) };
    await createRun(ns, spec, { name: 'unassigned' });
    await phase(ns, 'unassigned', 'Pending');
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/unassigned`, { spec: { cancelRequested: true } });
    const r = await finished(ns, 'unassigned');
    assert.equal(r.status?.phase, 'Cancelled');
    assert.equal(r.status?.assignedPod, undefined);
    assert.equal(endpointIn(r), undefined);
    assert.ok(!r.metadata.finalizers?.includes('kruntimes.io/function-cleanup'));
  });

  it('spec.timeout bounds the whole reservation, calls or not: Timeout, reason Timeout, the endpoint gone', async () => {
    const mode = { function: { handler: 'slow.slow', idleTimeoutSeconds: 600 } };
    await createRun(ns, { runtime: 'bash', mode, source: slowBash(0), timeout: '8s' }, { name: 'bounded' });
    await phase(ns, 'bounded', 'Ready');
    const ep = await endpointOf(admin(), ns, 'bounded');
    assert.equal((await invokeEndpoint(ep, caller, 1)).output, 'slept');
    const r = await finished(ns, 'bounded');
    assert.equal(r.status?.phase, 'Timeout');
    assert.equal(cond(r, 'Ready')?.reason, 'Timeout');
    assert.match(r.status?.message ?? '', /timeout after 8s/);
    assert.equal(endpointIn(r), undefined);
    // 503 while it ends, then 404: the Pod serves it no longer.
    await eventually('a 404 for a call after the timeout', async () =>
      (await refused(invokeEndpoint(ep, caller, 1))).code === 404 ? true : undefined,
    );
  });

  it('ends a function without calls after its idle timeout: Timeout, reason IdleTimeout', async () => {
    const r = await finished(ns, 'idle');
    assert.equal(r.status?.phase, 'Timeout');
    assert.equal(cond(r, 'Ready')?.reason, 'IdleTimeout');
    assert.equal(endpointIn(r), undefined);
  });
});
