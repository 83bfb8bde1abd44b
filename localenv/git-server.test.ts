/**
 * The devws Git Server component as the local environment runs it (localenv/git-server.ts), pure:
 * what the installer changes in the component's objects and what it leaves as shipped.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../lib/kube/types.ts';
import { EXTERNAL_CA_CONFIG, GIT_COMPONENT, localizeGitServer } from './git-server.ts';
import { REPO_ROOT } from './paths.ts';

type Doc = KubeObject & Record<string, unknown>;
type Pod = {
  containers: {
    env: { name: string; value?: string }[];
    ports: { name: string; containerPort: number }[];
    readinessProbe?: { tcpSocket?: object };
    livenessProbe?: { tcpSocket?: object };
    volumeMounts: { name: string; mountPath: string }[];
  }[];
  volumes: { name: string; secret?: { secretName: string; items?: { key: string; path: string }[] } }[];
};

const component = (): Doc[] =>
  parseAllDocuments(readFileSync(join(REPO_ROOT, GIT_COMPONENT, 'git-server.yaml'), 'utf8')).map(
    (d) => d.toJSON() as Doc,
  );
const podOf = (docs: Doc[]): Pod =>
  (docs.find((d) => d.kind === 'Deployment')?.spec as { template: { spec: Pod } }).template.spec;

describe('localenv: the devws Git Server component on the local environment', () => {
  it("serves with the tls-certificates function's git pair only (the component as shipped)", () => {
    const tls = podOf(component()).volumes.find((v) => v.name === 'tls');
    assert.deepEqual(tls?.secret, {
      secretName: 'kruntimes-extension-tls',
      items: [
        { key: 'git.crt', path: 'tls.crt' },
        { key: 'git.key', path: 'tls.key' },
      ],
    });
  });

  it('listens at the chosen port (probes follow the named port), the Service is ExternalName localhost, the allow-list and the external CA are set', () => {
    const docs = localizeGitServer(component(), { port: 41234, allow: '127.0.0.1/32', externalCA: true });
    const svc = docs.find((d) => d.kind === 'Service');
    assert.deepEqual(svc?.spec, { type: 'ExternalName', externalName: 'localhost' });
    const pod = podOf(docs);
    const c = pod.containers[0];
    const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.KRT_GIT_PORT, '41234');
    assert.equal(env.KRT_GIT_SYNC_ALLOW, '127.0.0.1/32');
    assert.equal(env.KRT_GIT_EXTERNAL_CA, '/etc/kruntimes/external-ca/ca.crt');
    assert.equal(c?.env.filter((e) => e.name === 'KRT_GIT_SYNC_ALLOW').length, 1, 'replaced, not duplicated');
    assert.deepEqual(c?.ports, [{ name: 'https', containerPort: 41234 }]);
    assert.deepEqual(c?.readinessProbe?.tcpSocket, { port: 'https' }, 'no probe host (Pod Security baseline)');
    assert.ok(pod.volumes.some((v) => v.name === 'external-ca' && JSON.stringify(v).includes(EXTERNAL_CA_CONFIG)));
    assert.ok(c?.volumeMounts.some((m) => m.mountPath === '/etc/kruntimes/external-ca'));
    const plain = podOf(localizeGitServer(component(), { port: 41234 }));
    assert.ok(!plain.volumes.some((v) => v.name === 'external-ca'), 'no external CA unless asked');
  });
});
