/**
 * PKI for the embedded control plane, made with the openssl CLI (P-256 keys: fast).
 * Every file lives under one directory; existing files are kept, so `up` is idempotent.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CertSpec {
  /** File stem: <name>.crt / <name>.key */
  name: string;
  cn: string;
  orgs?: string[];
  dns?: string[];
  ips?: string[];
  usage: 'server' | 'client' | 'both';
  /** Stem of the signing CA (default "ca"). */
  ca?: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function subject(cn: string, orgs: string[] = []): string {
  return orgs.map((o) => `/O=${o}`).join('') + `/CN=${cn}`;
}

export function ensureKey(dir: string, name: string): void {
  if (!existsSync(join(dir, `${name}.key`)))
    openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`], dir);
}

export function ensureCa(dir: string, name: string, cn: string): void {
  mkdirSync(dir, { recursive: true });
  if (existsSync(join(dir, `${name}.crt`))) return;
  ensureKey(dir, name);
  openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      `/CN=${cn}`,
      '-days',
      '3650',
      '-out',
      `${name}.crt`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ],
    dir,
  );
}

export function issueCert(dir: string, spec: CertSpec): void {
  if (existsSync(join(dir, `${spec.name}.crt`))) return;
  ensureKey(dir, spec.name);
  const ca = spec.ca ?? 'ca';
  const eku = spec.usage === 'server' ? 'serverAuth' : spec.usage === 'client' ? 'clientAuth' : 'serverAuth,clientAuth';
  const sans = [...(spec.dns ?? []).map((d) => `DNS:${d}`), ...(spec.ips ?? []).map((i) => `IP:${i}`)];
  const ext = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage=${eku}`,
  ];
  if (sans.length) ext.push(`subjectAltName=${sans.join(',')}`);
  writeFileSync(join(dir, `${spec.name}.ext`), ext.join('\n') + '\n');
  openssl(
    ['req', '-new', '-key', `${spec.name}.key`, '-subj', subject(spec.cn, spec.orgs), '-out', `${spec.name}.csr`],
    dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${spec.name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-days',
      '825',
      '-out',
      `${spec.name}.crt`,
      '-extfile',
      `${spec.name}.ext`,
    ],
    dir,
  );
}

export const SERVICE_CIDR = '10.96.0.0/16';
export const FIRST_SERVICE_IP = '10.96.0.1';

/** The whole control-plane PKI for one environment. */
export function ensureClusterPki(dir: string, nodeNames: string[]): void {
  ensureCa(dir, 'ca', 'kruntimes-local-ca');
  ensureCa(dir, 'front-proxy-ca', 'kruntimes-local-front-proxy-ca');
  issueCert(dir, {
    name: 'apiserver',
    cn: 'kube-apiserver',
    usage: 'server',
    ips: ['127.0.0.1', FIRST_SERVICE_IP],
    dns: [
      'localhost',
      'kubernetes',
      'kubernetes.default',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
    ],
  });
  issueCert(dir, { name: 'admin', cn: 'kruntimes-admin', orgs: ['system:masters'], usage: 'client' });
  issueCert(dir, { name: 'kcm', cn: 'system:kube-controller-manager', usage: 'client' });
  issueCert(dir, { name: 'scheduler', cn: 'system:kube-scheduler', usage: 'client' });
  issueCert(dir, {
    name: 'apiserver-kubelet-client',
    cn: 'kube-apiserver-kubelet-client',
    orgs: ['system:masters'],
    usage: 'client',
  });
  issueCert(dir, { name: 'front-proxy-client', cn: 'front-proxy-client', usage: 'client', ca: 'front-proxy-ca' });
  issueCert(dir, { name: 'local-provisioner', cn: 'system:kruntimes:local-provisioner', usage: 'client' });
  for (const node of nodeNames) {
    issueCert(dir, { name: `node-${node}`, cn: `system:node:${node}`, orgs: ['system:nodes'], usage: 'client' });
    issueCert(dir, {
      name: `node-${node}-serving`,
      cn: `system:node:${node}`,
      usage: 'server',
      ips: ['127.0.0.1'],
      dns: ['localhost', node],
    });
  }
  if (!existsSync(join(dir, 'sa.key'))) {
    ensureKey(dir, 'sa');
    openssl(['ec', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
  }
}
