import assert from 'node:assert/strict';
import fc from 'fast-check';
import { containerEnv, expandVars, fieldValue, EnvError, type DataSource } from './env.ts';
import type { Pod } from './pod-types.ts';

const pod: Pod = {
  metadata: { name: 'p', namespace: 'ns', uid: 'u1', labels: { app: 'a' }, annotations: { note: 'n' } },
  spec: { nodeName: 'node-1', serviceAccountName: 'sa', containers: [] },
};
const data: DataSource = {
  secret: (_ns, name) => Promise.resolve(name === 's' ? { k: 'secret-v' } : undefined),
  configMap: (_ns, name) => Promise.resolve(name === 'c' ? { a: '1', b: '2' } : undefined),
};
const ips = { pod: '127.1.2.3', host: '127.0.0.1' };

describe('node agent env', () => {
  it('resolves downward API field paths', () => {
    assert.equal(fieldValue(pod, 'metadata.name', ips.pod, ips.host), 'p');
    assert.equal(fieldValue(pod, "metadata.labels['app']", ips.pod, ips.host), 'a');
    assert.equal(fieldValue(pod, "metadata.annotations['note']", ips.pod, ips.host), 'n');
    assert.equal(fieldValue(pod, 'status.podIP', ips.pod, ips.host), '127.1.2.3');
    assert.throws(() => fieldValue(pod, 'spec.bogus', ips.pod, ips.host), EnvError);
  });

  it('expands $(VAR) like Kubernetes: $$ escapes, unknown references stay', () => {
    assert.equal(expandVars('$(A)-$(B)', { A: 'x', B: 'y' }), 'x-y');
    assert.equal(expandVars('$$(A)', { A: 'x' }), '$(A)');
    assert.equal(expandVars('$(NOPE)', {}), '$(NOPE)');
    fc.assert(
      fc.property(
        fc.string().filter((s) => !s.includes('$')),
        (s) => expandVars(s, { A: 'x' }) === s,
      ),
    );
  });

  it('builds the environment from envFrom, values and references, honouring optional', async () => {
    const env = await containerEnv(
      pod,
      {
        name: 'c',
        image: 'bash',
        envFrom: [{ prefix: 'C_', configMapRef: { name: 'c' } }, { configMapRef: { name: 'absent', optional: true } }],
        env: [
          { name: 'S', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
          { name: 'X', value: '$(S)+$(C_a)' },
          { name: 'O', valueFrom: { secretKeyRef: { name: 's', key: 'missing', optional: true } } },
          { name: 'IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
        ],
      },
      data,
      { BASE: 'b' },
      ips,
    );
    assert.deepEqual(env, { BASE: 'b', C_a: '1', C_b: '2', S: 'secret-v', X: 'secret-v+1', IP: '127.1.2.3' });
  });

  it('fails with CreateContainerConfigError on a missing required reference', async () => {
    await assert.rejects(
      containerEnv(
        pod,
        { name: 'c', image: 'bash', env: [{ name: 'S', valueFrom: { secretKeyRef: { name: 'nope', key: 'k' } } }] },
        data,
        {},
        ips,
      ),
      (e: unknown) =>
        e instanceof EnvError && e.reason === 'CreateContainerConfigError' && /secret "nope" not found/.test(e.message),
    );
    await assert.rejects(
      containerEnv(
        pod,
        { name: 'c', image: 'bash', env: [{ name: 'S', valueFrom: { configMapKeyRef: { name: 'c', key: 'zz' } } }] },
        data,
        {},
        ips,
      ),
      /couldn't find key zz in configmap ns\/c/,
    );
  });
});
