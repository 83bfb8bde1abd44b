/**
 * Loopback backends reached through the API server, the pattern every kruntimes webhook and
 * aggregated API uses locally: an `ExternalName: localhost` Service, the backend's real port
 * in the webhook/APIService `service.port`, TLS verified against caBundle with the
 * `<svc>.<ns>.svc` name. Nothing dials a ClusterIP.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { isApiError } from '../lib/kube/errors.ts';
import { admin, deleteNamespace, eventually, newNamespace, pkiFile, servingCert, type Obj } from './helpers.ts';

function listen(srv: https.Server): Promise<number> {
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve((srv.address() as AddressInfo).port)));
}

function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req
      .on('data', (c: Buffer) => chunks.push(c))
      .on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>))
      .on('error', reject);
  });
}

function json(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function externalNameService(ns: string, name: string): Promise<void> {
  await admin().create(`/api/v1/namespaces/${ns}/services`, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name },
    spec: { type: 'ExternalName', externalName: 'localhost' },
  });
}

describe('loopback admission webhook and APIService through the API server', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('agg');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  describe('validating webhook (service reference, fail closed)', () => {
    let srv: https.Server;
    const whName = `e2e-deny-label-${process.pid}`;
    let calls = 0;

    before(async () => {
      const pki = servingCert(`webhook-${ns}`, [`krt-webhook.${ns}.svc`]);
      srv = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
        void readJson(req).then((review) => {
          calls++;
          const request = review.request as { uid: string; object: Obj };
          const deny = request.object.metadata.labels?.deny === 'true';
          json(res, 200, {
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: {
              uid: request.uid,
              allowed: !deny,
              ...(deny
                ? {
                    status: {
                      code: 403,
                      reason: 'Forbidden',
                      message: 'denied by the e2e webhook: label deny=true is not allowed',
                    },
                  }
                : {}),
            },
          });
        });
      });
      const port = await listen(srv);
      await externalNameService(ns, 'krt-webhook');
      await admin().create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingWebhookConfiguration',
        metadata: { name: whName },
        webhooks: [
          {
            name: 'deny-label.e2e.kruntimes.io',
            admissionReviewVersions: ['v1'],
            sideEffects: 'None',
            failurePolicy: 'Fail',
            timeoutSeconds: 5,
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
            rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
            clientConfig: {
              service: { namespace: ns, name: 'krt-webhook', path: '/validate', port },
              caBundle: pki.ca.toString('base64'),
            },
          },
        ],
      });
    });
    after(async () => {
      await admin()
        .delete(`/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${whName}`)
        .catch(() => undefined);
      srv.close();
    });

    const cm = (name: string, deny: boolean): object => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, labels: { deny: String(deny) } },
    });

    it('rejects what the webhook denies, with its message, and admits the rest', async () => {
      const err = await eventually('the webhook to be in effect', async () => {
        try {
          await admin().create(`/api/v1/namespaces/${ns}/configmaps`, cm(`denied-${Date.now()}`, true));
          return undefined;
        } catch (e) {
          return e;
        }
      });
      assert.ok(isApiError(err, 403), `expected 403, got ${String(err)}`);
      assert.match(
        err.message,
        /admission webhook "deny-label.e2e.kruntimes.io" denied the request: denied by the e2e webhook: label deny=true is not allowed/,
      );
      await admin().create(`/api/v1/namespaces/${ns}/configmaps`, cm('allowed', false));
      assert.ok(calls >= 2);
    });

    it('fails closed when the webhook backend is down', async () => {
      await new Promise<void>((r) => {
        srv.close(() => r());
        srv.closeAllConnections();
      });
      await assert.rejects(
        admin().create(`/api/v1/namespaces/${ns}/configmaps`, cm('while-down', false)),
        (e: unknown) => isApiError(e) && /failed calling webhook "deny-label.e2e.kruntimes.io"/.test(e.message),
      );
    });
  });

  describe('aggregated APIService (requestheader mTLS)', () => {
    let srv: https.Server;
    const apiService = 'v1alpha1.e2e.kruntimes.io';
    const seen: { user?: string; groups?: string }[] = [];

    before(async () => {
      const auth = await admin().get<Obj & { data: Record<string, string> }>(
        '/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication',
      );
      const allowed = JSON.parse(auth.data['requestheader-allowed-names'] ?? '[]') as string[];
      const pki = servingCert(`aggregated-${ns}`, [`krt-aggregated.${ns}.svc`]);
      srv = https.createServer(
        {
          cert: pki.cert,
          key: pki.key,
          ca: auth.data['requestheader-client-ca-file'],
          requestCert: true,
          rejectUnauthorized: true,
        },
        (req, res) => {
          const peer = (req.socket as TLSSocket).getPeerCertificate();
          if (!allowed.includes(String(peer.subject.CN))) {
            json(res, 403, { kind: 'Status', status: 'Failure', code: 403, message: 'proxy client not allowed' });
            return;
          }
          const user = req.headers['x-remote-user'] as string | undefined;
          seen.push({ user, groups: req.headers['x-remote-group'] as string | undefined });
          const path = req.url?.split('?')[0] ?? '';
          if (path === '/apis/e2e.kruntimes.io/v1alpha1') {
            json(res, 200, {
              kind: 'APIResourceList',
              apiVersion: 'v1',
              groupVersion: 'e2e.kruntimes.io/v1alpha1',
              resources: [{ name: 'echoes', singularName: 'echo', namespaced: true, kind: 'Echo', verbs: ['get'] }],
            });
            return;
          }
          const m = /^\/apis\/e2e\.kruntimes\.io\/v1alpha1\/namespaces\/([^/]+)\/echoes\/([^/]+)$/.exec(path);
          if (m) {
            json(res, 200, {
              apiVersion: 'e2e.kruntimes.io/v1alpha1',
              kind: 'Echo',
              metadata: { namespace: m[1], name: m[2] },
              user,
            });
            return;
          }
          json(res, 404, {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            code: 404,
            reason: 'NotFound',
            message: `no route ${path}`,
          });
        },
      );
      const port = await listen(srv);
      await externalNameService(ns, 'krt-aggregated');
      await admin().create('/apis/apiregistration.k8s.io/v1/apiservices', {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: { name: apiService },
        spec: {
          group: 'e2e.kruntimes.io',
          version: 'v1alpha1',
          groupPriorityMinimum: 1000,
          versionPriority: 15,
          service: { namespace: ns, name: 'krt-aggregated', port },
          caBundle: pki.ca.toString('base64'),
        },
      });
    });
    after(async () => {
      await admin()
        .delete(`/apis/apiregistration.k8s.io/v1/apiservices/${apiService}`)
        .catch(() => undefined);
      srv.close();
    });

    it('becomes Available and proxies requests with the caller identity', async () => {
      await eventually('APIService Available', async () => {
        const s = await admin().get<Obj & { status?: { conditions?: { type: string; status: string }[] } }>(
          `/apis/apiregistration.k8s.io/v1/apiservices/${apiService}`,
        );
        return s.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True');
      });
      const echo = await admin().get<Obj & { user?: string }>(
        `/apis/e2e.kruntimes.io/v1alpha1/namespaces/${ns}/echoes/hello`,
      );
      assert.equal(echo.metadata.name, 'hello');
      assert.equal(echo.user, 'kruntimes-admin');
      assert.ok(seen.some((s) => s.user === 'kruntimes-admin' && (s.groups ?? '').includes('system:masters')));
    });

    it('refuses a direct connection without the front-proxy client certificate', async () => {
      const port = (srv.address() as AddressInfo).port;
      await assert.rejects(
        new Promise((resolve, reject) => {
          https
            .get(
              {
                host: '127.0.0.1',
                port,
                path: '/apis/e2e.kruntimes.io/v1alpha1',
                ca: pkiFile('ca.crt'),
                servername: 'localhost',
              },
              resolve,
            )
            .on('error', reject);
        }),
      );
      const admin2 = { cert: pkiFile('admin.crt'), key: pkiFile('admin.key') };
      await assert.rejects(
        new Promise((resolve, reject) => {
          https
            .get(
              { host: '127.0.0.1', port, path: '/apis/e2e.kruntimes.io/v1alpha1', ca: pkiFile('ca.crt'), ...admin2 },
              resolve,
            )
            .on('error', reject);
        }),
        'a certificate from the cluster CA (not the front-proxy CA) is refused',
      );
    });
  });
});
