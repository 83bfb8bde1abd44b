/**
 * WatchTrigger.ignore of the Run scheduler and reaper (issue 13: the webhook transport within
 * 1.15x of in-process): an invocation over a transport must not carry the namespace's finished
 * Runs, and leaving them out must not change what the handlers decide.
 */
import assert from 'node:assert/strict';
import { FakeState } from '../lib/fn/fake-state.ts';
import { handlerState } from '../lib/fn/ignore.ts';
import { R } from '../lib/fn/resources.ts';
import type { InvocationRequest, InvocationResponse } from '../lib/fn/wire.ts';
import type { ReconcileInput, WatchFunction } from '../lib/fn/types.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import reaper, { FUNCTION_FINALIZER } from '../functions/run-reaper/index.ts';
import scheduler from '../functions/run-scheduler/index.ts';
import { WireTransport } from './transport.ts';
import { serveInvocation } from '../lib/fn/wire.ts';

const NOW = new Date('2026-12-01T20:30:00Z');
const T = '2026-12-01T20:29:00Z';

const pod = (name: string): KubeObject => ({
  metadata: {
    name,
    namespace: 'ns',
    uid: `uid-${name}`,
    labels: { runtime: 'bash', 'kruntimes.io/runtime': 'bash' },
  },
  spec: { nodeName: 'n1' },
  status: {
    phase: 'Running',
    conditions: [
      { type: 'Ready', status: 'True' },
      { type: 'kruntimes.io/RuntimedReady', status: 'True', lastProbeTime: T },
    ],
  },
});

const run = (
  name: string,
  phase: string,
  over: { runtime?: string; pod?: string; finalizers?: string[] } = {},
): KubeObject => ({
  metadata: {
    name,
    namespace: 'ns',
    uid: `uid-${name}`,
    resourceVersion: '7',
    creationTimestamp: T,
    ...(over.finalizers ? { finalizers: over.finalizers } : {}),
  },
  spec: { runtime: over.runtime ?? 'bash', mode: { task: { args: ['echo'] } } },
  status: {
    phase,
    ...(over.pod ? { assignedPod: over.pod, assignedPodUID: `uid-${over.pod}` } : {}),
    ...(phase === 'Succeeded' ? { completionTime: T } : {}),
  },
});

function state(): FakeState {
  const s = new FakeState([
    [R.runtimes, { metadata: { name: 'bash', namespace: 'ns' } }],
    [R.pods, pod('p1')],
    [R.runs, run('pending-1', 'Pending')],
    [R.runs, run('pending-2', 'Pending')],
    [R.runs, run('running', 'Running', { pod: 'p1' })],
    [R.runs, run('on-gone-pod', 'Running', { pod: 'p-gone' })],
    [R.runs, run('leftover', 'Succeeded', { pod: 'p-gone', finalizers: [FUNCTION_FINALIZER] })],
    [R.runs, run('other-runtime', 'Pending', { runtime: 'python' })],
  ]);
  for (let i = 0; i < 20; i++) s.put(R.runs, run(`done-${i}`, 'Succeeded', { pod: 'p1' }));
  return s;
}

const input = (fn: WatchFunction, s: FakeState): ReconcileInput => ({
  key: 'ns/bash',
  object: s.get(R.runtimes, 'ns', 'bash'),
  state: handlerState(fn, s, 'ns/bash'),
  now: NOW,
});

/** The Runs one invocation over the wire carries (every round's reads). */
async function runsSent(fn: WatchFunction): Promise<string[]> {
  const sent = new Set<string>();
  const send = async (f: WatchFunction, req: InvocationRequest): Promise<InvocationResponse> => {
    for (const r of req.reads)
      for (const o of [...(r.items ?? []), ...(r.object ? [r.object] : [])])
        if (r.resource.resource === 'runs') sent.add(o.metadata.name ?? '');
    return serveInvocation(f, req);
  };
  await new WireTransport('webhook', send).invoke(fn, input(fn, state()));
  return [...sent].sort();
}

describe('Run scheduler and reaper: what their invocations carry (WatchTrigger.ignore)', () => {
  it('a scheduler invocation over the wire carries only the pending and active Runs of its Runtime', async () => {
    assert.deepEqual(await runsSent(scheduler as WatchFunction), ['on-gone-pod', 'pending-1', 'pending-2', 'running']);
  });

  it('a reaper invocation carries its Runtime active Runs and the finished one holding the function finalizer', async () => {
    assert.deepEqual(await runsSent(reaper as WatchFunction), [
      'leftover',
      'on-gone-pod',
      'pending-1',
      'pending-2',
      'running',
    ]);
  });

  for (const fn of [scheduler, reaper] as WatchFunction[])
    it(`${fn.name} decides the same with and without the Runs it ignores`, async () => {
      const full = await fn.handler({ ...input(fn, state()), state: state() });
      const narrowed = await fn.handler(input(fn, state()));
      assert.ok(full.length > 0);
      assert.deepEqual(narrowed, full);
    });
});
