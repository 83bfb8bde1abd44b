import assert from 'node:assert/strict';
import { runtimedGitVar, templateProblems, type TemplateInput } from './template-policy.ts';

const runtime = (c: Record<string, unknown> = {}, pod: Record<string, unknown> = {}): TemplateInput => ({
  template: { spec: { containers: [{ name: 'runtime', image: 'img', ...c }], ...pod } },
});

describe('Runtime template policy (issue 11 item 6)', () => {
  it('admits an ordinary template with TLS GIT_* settings', () => {
    assert.deepEqual(
      templateProblems(
        runtime({
          env: [
            { name: 'GIT_SSL_CAINFO', value: '/etc/ssl/ca.crt' },
            { name: 'X', value: '1' },
          ],
        }),
      ),
      [],
    );
  });

  it('refuses a container named runtimed, in containers or initContainers', () => {
    const t: TemplateInput = {
      template: {
        spec: {
          containers: [{ name: 'runtime' }, { name: 'runtimed', image: 'evil', command: ['sh'] }],
          initContainers: [{ name: 'runtimed' }],
        },
      },
    };
    const p = templateProblems(t);
    assert.equal(p.length, 2);
    assert.match(
      p[0] ?? '',
      /^spec\.template\.spec\.containers\[1\]\.name: Forbidden: "runtimed" is injected by kruntimes/,
    );
    assert.match(p[1] ?? '', /^spec\.template\.spec\.initContainers\[0\]\.name/);
  });

  it('refuses GIT_* variables that run programs or point into /workspace', () => {
    const p = templateProblems(
      runtime({
        env: [
          { name: 'GIT_SSH_COMMAND', value: 'sh -c "env > /workspace/leak"' },
          { name: 'GIT_CONFIG_GLOBAL', value: '/workspace/cfg' },
          { name: 'GIT_SSL_CAINFO', value: '/workspace/ca.crt' },
        ],
      }),
    );
    assert.equal(p.length, 3);
    assert.match(p[0] ?? '', /env\[0\]\.name: Forbidden: GIT_SSH_COMMAND is not passed to runtimed's git/);
    assert.match(p[1] ?? '', /GIT_CONFIG_GLOBAL/);
    assert.match(p[2] ?? '', /env\[2\]\.value: Forbidden: GIT_SSL_CAINFO may not point into \/workspace/);
  });

  it('refuses a shared process namespace and the host PID namespace', () => {
    const p = templateProblems(runtime({}, { shareProcessNamespace: true, hostPID: true }));
    assert.deepEqual(
      p.map((x) => x.split(':')[0]),
      ['spec.template.spec.shareProcessNamespace', 'spec.template.spec.hostPID'],
    );
  });

  it("keeps the artifact store's claim and credentials Secret away from the template's containers", () => {
    const s3: TemplateInput = {
      ...runtime(
        {
          env: [{ name: 'K', valueFrom: { secretKeyRef: { name: 'store-creds' } } }],
          envFrom: [{ secretRef: { name: 'store-creds' } }],
        },
        {
          volumes: [
            { name: 'c', secret: { secretName: 'store-creds' } },
            { name: 'p', projected: { sources: [{ secret: { name: 'store-creds' } }] } },
            { name: 'ok', secret: { secretName: 'other' } },
          ],
        },
      ),
      artifactStore: { driver: 's3', s3: { credentialsSecretName: 'store-creds' } },
    };
    assert.equal(templateProblems(s3).length, 4);
    const fs: TemplateInput = {
      template: {
        spec: {
          containers: [{ name: 'runtime' }],
          volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'store' } }],
        },
      },
      artifactStore: { driver: 'filesystem', filesystem: { volumeClaimName: 'store' } },
    };
    assert.match(
      templateProblems(fs)[0] ?? '',
      /claimName: Forbidden: the artifact store's claim "store" is mounted only into runtimed/,
    );
  });

  it('runtimed receives only the allowed GIT_* variables (render side)', () => {
    assert.equal(runtimedGitVar({ name: 'GIT_SSL_NO_VERIFY', value: '1' }), true);
    assert.equal(runtimedGitVar({ name: 'GIT_SSH_COMMAND', value: 'x' }), false);
    assert.equal(runtimedGitVar({ name: 'GIT_SSL_CAINFO', value: '/workspace/x' }), false);
    assert.equal(runtimedGitVar({ name: 'PATH', value: '/bin' }), false);
  });
});
