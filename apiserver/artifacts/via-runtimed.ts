/**
 * Reading an artifact through the Runtime's own Pods, which hold the store's S3 credentials or
 * its Filesystem PVC: the backend asks a runtimed of the Run's Runtime (its assigned Pod first,
 * else any Runtime Pod that publishes a session port) over the pinned, token-authenticated
 * session link (ADR 0007) to open the reference; runtimed only opens references of its own namespace.
 */
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import { ArtifactError } from '../../runtimed/artifacts/errors.ts';
import type { ArtifactRef } from '../../runtimed/artifacts/store.ts';
import {
  LinkError,
  openLink,
  responseMessage,
  sessionEndpoint,
  type PodObj,
  type SessionTokens,
} from '../sessions/link.ts';
import { ArtifactRequestError } from './select.ts';

export interface RuntimedTarget {
  client: KubeClient;
  tokens: SessionTokens;
  namespace: string;
  runtime?: string;
  assignedPod?: string;
}

/** Runtime Pods that can serve, the Run's assigned Pod first. */
export async function candidatePods(t: RuntimedTarget): Promise<PodObj[]> {
  const out: PodObj[] = [];
  if (t.assignedPod) {
    const p = await t.client
      .get<PodObj>(`/api/v1/namespaces/${t.namespace}/pods/${t.assignedPod}`)
      .catch((err: unknown) => {
        if (isApiError(err, 404)) return undefined;
        throw err;
      });
    if (p) out.push(p);
  }
  if (t.runtime) {
    const list = await t.client.list<PodObj>(`/api/v1/namespaces/${t.namespace}/pods`, {
      labelSelector: `runtime=${t.runtime}`,
    });
    out.push(...list.items.filter((p) => p.metadata.name !== t.assignedPod));
  }
  return out.filter((p) => !p.metadata.deletionTimestamp && typeof sessionEndpoint(p) !== 'string');
}

export async function openViaRuntimed(t: RuntimedTarget, ref: ArtifactRef): Promise<Readable> {
  const pod = (await candidatePods(t))[0];
  if (!pod)
    throw new ArtifactRequestError(
      503,
      'ServiceUnavailable',
      `no running Runtime Pod of Runtime ${t.runtime ?? '?'} in namespace ${t.namespace} can read its artifact store right now; artifacts are served through the Runtime's Pods, retry when one is Ready`,
    );
  const link = await openLink(pod, t.tokens).catch((err: unknown) => {
    throw err instanceof LinkError ? new ArtifactRequestError(503, 'ServiceUnavailable', err.message) : err;
  });
  const body = JSON.stringify({ ref });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    // The socket is already verified against the pinned fingerprint (the certificate is self-issued).
    const req = https.request(
      {
        method: 'POST',
        host: link.host,
        port: link.port,
        path: '/v1/artifacts/open',
        agent: false,
        createConnection: () => link.socket,
        rejectUnauthorized: false,
        headers: {
          Authorization: `Bearer ${link.token}`,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
        },
      },
      resolve,
    );
    req.on('error', reject);
    req.end(body);
  });
  if (res.statusCode === 200) return res;
  const message = await responseMessage(res);
  if (res.statusCode === 404) throw new ArtifactError('ArtifactNotFound', message);
  if (res.statusCode === 503) throw new ArtifactError('ArtifactStoreError', message);
  throw new ArtifactRequestError(
    502,
    'BadGateway',
    `runtimed of Runtime Pod ${pod.metadata.name} could not open the artifact: ${message}`,
  );
}
