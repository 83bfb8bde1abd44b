import assert from 'node:assert/strict';
import { checkSessionRun, sessionEndpoint, SessionError } from './handler.ts';

const FP = Array.from({ length: 32 }, (_, i) => ((i * 7) % 256).toString(16).toUpperCase().padStart(2, '0')).join(':');

describe('sessions.kruntimes.io backend: choosing the target', () => {
  const run = (spec: object, status: object): Parameters<typeof checkSessionRun>[0] => ({
    metadata: { name: 'shell', namespace: 'team' },
    spec,
    status,
  });

  it('accepts a Ready session Run and names its Pod', () => {
    assert.deepEqual(
      checkSessionRun(run({ mode: { session: {} } }, { phase: 'Ready', assignedPod: 'rt-1', assignedPodUID: 'u1' })),
      { pod: 'rt-1', podUID: 'u1' },
    );
  });

  const refused: [string, object, object, number, RegExp][] = [
    ['a task Run', { mode: { task: {} } }, { phase: 'Running', assignedPod: 'p' }, 400, /not a session Run/],
    ['a pending session', { mode: { session: {} } }, { phase: 'Pending' }, 409, /not Ready yet \(phase Pending\)/],
    ['a scheduled session', { mode: { session: {} } }, { phase: 'Scheduled', assignedPod: 'p' }, 409, /not Ready yet/],
    [
      'an ended session',
      { mode: { session: {} } },
      { phase: 'Cancelled', assignedPod: 'p' },
      409,
      /has ended \(phase Cancelled\)/,
    ],
  ];
  for (const [name, spec, status, code, msg] of refused) {
    it(`refuses ${name} with ${code}`, () => {
      assert.throws(
        () => checkSessionRun(run(spec, status)),
        (e: unknown) => e instanceof SessionError && e.code === code && msg.test(e.message),
      );
    });
  }

  it('takes the address from podIP, the port from the Pod spec and only the fingerprint from the condition', () => {
    const pod = {
      metadata: { name: 'rt-1' },
      spec: {
        containers: [{ name: 'runtime' }, { name: 'runtimed', ports: [{ name: 'session', containerPort: 9095 }] }],
      },
      status: {
        podIP: '127.0.10.2',
        conditions: [{ type: 'kruntimes.io/SessionServer', status: 'True', message: `port=9095 sha256=${FP}` }],
      },
    };
    assert.deepEqual(sessionEndpoint(pod), { host: '127.0.10.2', port: 9095, fingerprint: FP });
    // A port written into the condition (by whoever holds a token that may write it) is ignored.
    const moved = {
      ...pod,
      status: {
        ...pod.status,
        conditions: [{ type: 'kruntimes.io/SessionServer', status: 'True', message: `port=4444 sha256=${FP}` }],
      },
    };
    assert.deepEqual(sessionEndpoint(moved), { host: '127.0.10.2', port: 9095, fingerprint: FP });
    assert.match(JSON.stringify(sessionEndpoint({ ...pod, spec: { containers: [] } })), /declares no session port/);
    assert.match(
      JSON.stringify(sessionEndpoint({ ...pod, status: { podIP: '127.0.10.2', conditions: [] } })),
      /has not published its session port/,
    );
    assert.match(
      JSON.stringify(
        sessionEndpoint({
          ...pod,
          status: {
            podIP: '127.0.10.2',
            conditions: [{ type: 'kruntimes.io/SessionServer', status: 'True', message: 'port=9095 sha256=AB' }],
          },
        }),
      ),
      /has not published/,
    );
    assert.match(
      JSON.stringify(sessionEndpoint({ ...pod, status: { conditions: pod.status.conditions } })),
      /has no IP/,
    );
  });
});
