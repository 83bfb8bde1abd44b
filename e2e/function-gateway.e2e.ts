/**
 * Function-mode Runs (issue 15) on the real local cluster, the parts function-runs.e2e.ts leaves
 * out: a Ready function Run holds its Runtime capacity slot (a task Run waits for it and is placed
 * once it ends); the gateway's 503 for a Run that is not Ready yet and for a stale owner (a
 * runtimed whose execution lease lapsed); the 1 MiB request and response limits; the finalizer
 * unregistering the handler before the Run goes (its warm worker is gone when the object is);
 * cancel draining a call in flight; `krt run --function --handler`, then `krt invoke`; and a
 * handler the Runtime Server dropped after its lease lapsed (registered again under the retry
 * policy, else Failed FunctionLost).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { isApiError } from '../lib/kube/errors.ts';
import {
  closeInvokeAgents,
  endpointOf,
  invokeEndpoint,
  InvokeError,
  type InvokeEndpoint,
} from '../lib/invoke/client.ts';
import { E2E_ROOT } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, serviceAccountClient } from './helpers.ts';
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

const MiB = 1 << 20;
const FINALIZER = 'kruntimes.io/function-cleanup';

/** A bash function answering by its payload: "pid" its worker's pid, "big" 1 MiB + 1 of output, else the payload's length. */
const TOOL = {
  inlinePath: 'tool.sh',
  inline: [
    'tool() {',
    '  case "$1" in',
    `    '"pid"') echo "$BASHPID" ;;`,
    `    '"big"') head -c ${MiB + 1} /dev/zero | tr '\\0' a ;;`,
    '    *) echo "${#1}" ;;',
    '  esac',
    '}',
    '',
  ].join('\n'),
};

/** A bash function whose file takes `seconds` to source (registration is that long). */
const slowSource = (seconds: number): Record<string, unknown> => ({
  inlinePath: 'late.sh',
  inline: `sleep ${seconds}\nlate() { echo '"late"'; }\n`,
});

const fn = (runtime: string, handler: string, source: Record<string, unknown>): Record<string, unknown> => ({
  runtime,
  mode: { function: { handler, idleTimeoutSeconds: 600 } },
  source,
});

/** One POST of raw bytes to an endpoint: the HTTP code and the Status reason (Content-Length, or chunked). */
function post(
  ep: InvokeEndpoint,
  token: string,
  body: Buffer,
  chunked = false,
): Promise<{ code: number; reason: string }> {
  return new Promise((resolve, reject) => {
    const length: Record<string, number> = chunked ? {} : { 'Content-Length': body.length };
    const req = https.request(ep.url, {
      method: 'POST',
      ca: Buffer.from(ep.caBundle ?? '', 'base64'),
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...length },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const reason = res.statusCode === 200 ? '' : ((JSON.parse(text) as { reason?: string }).reason ?? '');
        resolve({ code: res.statusCode ?? 0, reason });
      });
    });
    // The gateway may answer 413 before it read all of a large body: the rest of the write can fail.
    req.on('error', reject);
    if (chunked) {
      for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024));
      req.end();
    } else req.end(body);
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

/** A process is gone (or a zombie its parent has not reaped yet): it runs no more. */
function processGone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? true;
  } catch {
    return true;
  }
}

/** The host pid of the Runtime Server (the `runtime` container) of a Runtime Pod of the local node agent. */
async function runtimeServerPid(ns: string, pod: string): Promise<number> {
  const p = await admin().get<{ metadata: { uid?: string }; spec: { nodeName?: string } }>(
    `/api/v1/namespaces/${ns}/pods/${pod}`,
  );
  const file = join(E2E_ROOT, 'nodes', p.spec.nodeName ?? '', 'pods', p.metadata.uid ?? '', 'pids', 'runtime');
  return Number(readFileSync(file, 'utf8').trim());
}

describe('Function-mode Runs: capacity, deletion, limits, stale owner and krt run --function', function () {
  let ns: string;
  let caller: string;
  let makerKubeconfig: string;
  /** The warm worker pid of each Run the stale-owner spec leaves uncalled, before the Runtime Server stopped. */
  const workers = new Map<string, number>();
  before(async () => {
    ns = await newNamespace('fngw');
    const bash = example('examples/runtimes/bash.yaml') as { spec: Record<string, unknown> };
    await createRuntime(ns, 'two', { ...bash.spec, replicas: 1, capacity: { resources: { runs: '2' } } });
    await createRuntime(ns, 'gw', { ...bash.spec, replicas: 1, capacity: { resources: { runs: '6' } } });
    const runs = ['runs'];
    await grant(ns, 'maker', 'maker', { apiGroups: ['kruntimes.io'], resources: runs, verbs: ['create', 'get'] });
    makerKubeconfig = await saKubeconfig(ns, 'maker');
    caller = (await serviceAccountClient(ns, 'maker')).bearerToken() ?? '';
    await createRun(ns, fn('gw', 'tool.tool', TOOL), { name: 'tool' });
    await createRun(ns, fn('two', 'tool.tool', TOOL), { name: 'holder' });
    await createRun(ns, fn('gw', 'tool.tool', TOOL), { name: 'fenced' });
    // Not called while the Runtime Server is stopped: they find their handler gone after it is back.
    const retryPolicy = { maxAttempts: 3, backoff: '100ms' };
    await createRun(ns, { ...fn('gw', 'tool.tool', TOOL), retryPolicy }, { name: 'relost' });
    await createRun(ns, fn('gw', 'tool.tool', TOOL), { name: 'dropped' });
    await runtimePods(ns, 'two', 1);
    await runtimePods(ns, 'gw', 1);
  });
  after(async () => {
    closeInvokeAgents();
    await deleteNamespace(ns);
  });

  it('answers 503 while a function is registering (not Ready), then serves it once Ready', async () => {
    const holder = await phase(ns, 'holder', 'Ready');
    const ep = await endpointOf(admin(), ns, 'holder');
    const late = await createRun(ns, fn('two', 'late.late', slowSource(4)), { name: 'late' });
    // The same Pod's gateway (one Pod): the URL of `late` is its own before status.endpoint exists.
    const url = ep.url.replace(`/runs/holder/${holder.metadata.uid}/`, `/runs/late/${late.metadata.uid}/`);
    const early = await eventually('a 503 for a call while late registers', async () => {
      const e = await refused(invokeEndpoint({ ...ep, url }, caller, 1));
      return e.code === 503 ? e : undefined; // 404 until runtimed took the Run up
    });
    assert.equal(early.reason, 'ServiceUnavailable');
    assert.match(early.message, /not ready yet/);
    assert.notEqual((await getRun(ns, 'late')).status?.phase, 'Ready');
    await phase(ns, 'late', 'Ready');
    assert.equal((await invokeEndpoint({ ...ep, url }, caller, 1)).output, 'late');
  });

  it('a Ready function Run holds its capacity slot: a task Run waits for it, and is placed once it ends', async () => {
    // holder and late hold both slots of `two`.
    await createRun(ns, { runtime: 'two', source: { inline: 'echo done' } }, { name: 'task' });
    const waiting = await eventually('the task Run to wait for capacity', async () => {
      const r = await getRun(ns, 'task');
      return /waiting for runtime capacity/.test(r.status?.message ?? '') ? r : undefined;
    });
    assert.equal(waiting.status?.phase, 'Pending');
    assert.equal(waiting.status?.assignedPod, undefined);
    assert.equal((await getRun(ns, 'late')).status?.phase, 'Ready');
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/late`, { spec: { cancelRequested: true } });
    assert.equal((await finished(ns, 'late')).status?.phase, 'Cancelled');
    const done = await finished(ns, 'task');
    assert.equal(done.status?.phase, 'Succeeded');
    assert.equal((await getRun(ns, 'holder')).status?.phase, 'Ready');
  });

  it('limits a request to 1 MiB (413, with or without Content-Length) and the output to 1 MiB (502); the Run stays Ready', async () => {
    await phase(ns, 'tool', 'Ready');
    const ep = await endpointOf(admin(), ns, 'tool');
    const json = (n: number): Buffer => Buffer.from(`"${'a'.repeat(n - 2)}"`);
    // Exactly 1 MiB is accepted: the function gets all of it as its one argument.
    assert.equal((await invokeEndpoint(ep, caller, 'a'.repeat(MiB - 2))).output, MiB);
    assert.deepEqual(await post(ep, caller, json(MiB + 1)), { code: 413, reason: 'RequestEntityTooLarge' });
    assert.deepEqual(await post(ep, caller, json(MiB + 1), true), { code: 413, reason: 'RequestEntityTooLarge' });
    const big = await refused(invokeEndpoint(ep, caller, 'big'));
    assert.deepEqual([big.code, big.reason], [502, 'OutputTooLarge']);
    assert.equal((await getRun(ns, 'tool')).status?.phase, 'Ready');
    assert.equal((await invokeEndpoint(ep, caller, 'xyz')).output, 5);
  });

  it('deleting a Ready function Run unregisters its handler before the object goes: its warm worker is gone with it', async () => {
    const ep = await endpointOf(admin(), ns, 'tool');
    const pid = (await invokeEndpoint(ep, caller, 'pid')).output as number;
    assert.ok(Number.isInteger(pid) && !processGone(pid), `worker pid ${pid}`);
    assert.ok((await getRun(ns, 'tool')).metadata.finalizers?.includes(FINALIZER));
    await admin().delete(`${GROUP}/namespaces/${ns}/runs/tool`);
    await eventually('tool to be deleted', () =>
      getRun(ns, 'tool').then(
        () => undefined,
        (err: unknown) => (isApiError(err, 404) ? true : undefined),
      ),
    );
    assert.ok(processGone(pid), `the function's worker ${pid} still runs after its Run was deleted`);
    const e = await refused(invokeEndpoint(ep, caller, 'pid'));
    assert.equal(e.code, 404);
  });

  it('cancel drains a call in flight: it ends with its answer, new calls get 503, then Cancelled and the worker gone', async () => {
    const inline = 'nap() { sleep 4; echo "$BASHPID"; }\n';
    await createRun(ns, fn('gw', 'nap.nap', { inlinePath: 'nap.sh', inline }), { name: 'nap' });
    await phase(ns, 'nap', 'Ready');
    const ep = await endpointOf(admin(), ns, 'nap');
    let settled = false;
    const first = invokeEndpoint(ep, caller, 1).finally(() => {
      settled = true;
    });
    await eventually('a 429 while the first call runs', async () =>
      (await refused(invokeEndpoint(ep, caller, 2))).code === 429 ? true : undefined,
    );
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/nap`, { spec: { cancelRequested: true } });
    const ending = await eventually('a 503 for a new call once the cancel is seen', async () => {
      const e = await refused(invokeEndpoint(ep, caller, 3));
      return e.code === 503 ? e : undefined;
    });
    assert.match(ending.message, /is ending/);
    assert.equal(settled, false, 'the first call ended before the cancel was seen: nothing was drained');
    const pid = (await first).output as number;
    assert.ok(Number.isInteger(pid), `worker pid ${pid}`);
    const done = await finished(ns, 'nap');
    assert.deepEqual([done.status?.phase, cond(done, 'Ready')?.reason], ['Cancelled', 'Cancelled']);
    await eventually('the function-cleanup finalizer to be removed', async () =>
      (await getRun(ns, 'nap')).metadata.finalizers?.includes(FINALIZER) ? undefined : true,
    );
    assert.ok(processGone(pid), `the drained function's worker ${pid} still runs after its Run was cancelled`);
  });

  it('krt run --function --handler creates a function Run that krt invoke calls', async () => {
    const script = 'hello() { printf \'{"hello":%s}\\n\' "$1"; }\n';
    const args = ['--runtime', 'gw', '--name', 'cli', '--inline', script, '--idle-timeout', '600'];
    const created = await krt(['run', '--function', '--handler', 'hello.hello', ...args], makerKubeconfig);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, /run\.kruntimes\.io\/cli created/);
    const ready = await phase(ns, 'cli', 'Ready');
    assert.deepEqual(ready.spec.mode, { function: { handler: 'hello.hello', idleTimeoutSeconds: 600 } });
    assert.equal((ready.spec.source as { inlinePath?: string }).inlinePath, 'hello.sh');
    assert.equal(cond(ready, 'Ready')?.reason, 'FunctionRegistered');
    const out = await krt(['invoke', 'cli', '-d', '{"n":1}'], makerKubeconfig);
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(JSON.parse(out.stdout), { hello: { n: 1 } });
  });

  it('answers 503 for a stale owner: a runtimed whose execution lease lapsed (its Runtime Server stopped) serves no call', async () => {
    const ready = await phase(ns, 'fenced', 'Ready');
    for (const name of ['relost', 'dropped']) {
      await phase(ns, name, 'Ready');
      workers.set(name, (await invokeEndpoint(await endpointOf(admin(), ns, name), caller, 'pid')).output as number);
    }
    const ep = await endpointOf(admin(), ns, 'fenced');
    const pid = await runtimeServerPid(ns, ready.status?.assignedPod ?? '');
    assert.ok(existsSync(`/proc/${pid}`), `Runtime Server pid ${pid}`);
    process.kill(pid, 'SIGSTOP'); // runtimed can renew the lease no more; it lapses FENCE_MS (20 s) after the last renewal
    try {
      const stale = await eventually(
        'a 503 for a call once the lease lapsed',
        async () => {
          const r = await invokeEndpoint(ep, caller, 1).then(
            () => undefined,
            (e: unknown) => e,
          );
          return r instanceof InvokeError && r.code === 503 ? r : undefined;
        },
        40_000,
        500,
      );
      assert.equal(stale.reason, 'NotRegistered');
      assert.match(stale.message, /fenced: the execution lease lapsed/);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // That call found the handler fenced, and so lost: no retries left, the Run ends FunctionLost.
    const lost = await finished(ns, 'fenced');
    assert.deepEqual([lost.status?.phase, cond(lost, 'Ready')?.reason], ['Failed', 'FunctionLost']);
  });

  it('after its Runtime Server dropped the handler (the lease lapsed, then it ran again): registered again under the retry policy, else Failed FunctionLost', async () => {
    // The lapse killed the warm workers and unregistered every function; runtimed still has them Ready.
    for (const [name, worker] of workers)
      await eventually(`the worker of ${name} (${worker}) to be killed by the lapse`, () =>
        Promise.resolve(processGone(worker)),
      );
    assert.equal((await getRun(ns, 'relost')).status?.phase, 'Ready');
    const ep = await endpointOf(admin(), ns, 'relost');
    const seen: string[] = [];
    const out = await eventually(
      'a call of relost to succeed once it is registered again',
      async () => {
        const r = await invokeEndpoint(ep, caller, 'pid').catch((e: unknown) => e);
        if (r instanceof InvokeError) seen.push(`${r.code} ${r.reason}`);
        return r instanceof InvokeError ? undefined : (r as { output: number }).output;
      },
      60_000,
      200,
    );
    assert.equal(seen[0], '503 NotRegistered', `answers before the success: ${seen.join(', ')}`);
    assert.ok(Number.isInteger(out) && out !== workers.get('relost') && !processGone(out), `new worker ${out}`);
    const again = await getRun(ns, 'relost');
    assert.equal(again.status?.phase, 'Ready');
    assert.equal(cond(again, 'Ready')?.reason, 'FunctionRegistered');
    assert.ok((again.status?.attempt ?? 0) >= 2, `attempt ${again.status?.attempt}`);
    const event = await runEvent(ns, 'relost', 'FunctionLost');
    assert.match(event.message, /registration attempt 1 failed: the Runtime Server no longer has the handler/);
    // Without retries: the first call finds the handler gone (503), and the Run ends Failed FunctionLost.
    const dropped = await endpointOf(admin(), ns, 'dropped');
    const first = await refused(invokeEndpoint(dropped, caller, 'pid'));
    assert.deepEqual([first.code, first.reason], [503, 'NotRegistered']);
    const end = await finished(ns, 'dropped');
    assert.deepEqual([end.status?.phase, cond(end, 'Ready')?.reason], ['Failed', 'FunctionLost']);
    assert.match(end.status?.message ?? '', /no longer has the handler registered/);
    assert.equal((end.status as { endpoint?: unknown }).endpoint, undefined);
    const after = await refused(invokeEndpoint(dropped, caller, 'pid'));
    assert.equal(after.code, 404, `${after.code} ${after.reason}: ${after.message}`);
  });
});
