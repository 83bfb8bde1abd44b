/**
 * artifacts.kruntimes.io/v1alpha1, served behind API aggregation:
 *   GET .../namespaces/{ns}/runs/{name}/artifacts             the Run's artifact references (JSON)
 *   GET .../namespaces/{ns}/runs/{name}/artifacts/{artifact}  the bytes (a directory: its tar.gz)
 * The API server has already authorised `get` on `runs/artifacts` (resourceNames = the Run) for
 * the caller. The backend reads the Run, opens the store its artifacts went to through a runtimed
 * of the Run's Runtime (which holds the store's credentials or mount; this backend holds neither)
 * and streams the object, checking size and sha256 against status.artifactRefs while streaming.
 */
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isArtifactError } from '../../runtimed/artifacts/errors.ts';
import type { ArtifactRef, RuntimeArtifactStoreSpec } from '../../runtimed/artifacts/store.ts';
import { status } from '../aggregation/status.ts';
import { ArtifactRequestError, downloadHeaders, pickRef, summarize, type VerifiableRef } from './select.ts';
import { openStore, storeSpecOf } from './store.ts';
import { DigestMismatchError, VerifyingStream } from './verify.ts';
import type { SessionTokens } from '../sessions/link.ts';
import { validObjectPath } from '../aggregation/names.ts';

export const ARTIFACTS_GROUP = 'artifacts.kruntimes.io';
type RunObj = KubeObject & {
  spec?: { runtime?: string };
  status?: { assignedPod?: string; artifactRefs?: ArtifactRef[]; artifactStore?: RuntimeArtifactStoreSpec };
};

async function loadRun(client: KubeClient, ns: string, name: string): Promise<RunObj> {
  try {
    return await client.get<RunObj>(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs/${name}`);
  } catch (err) {
    if (isApiError(err, 404))
      throw new ArtifactRequestError(404, 'NotFound', `runs.kruntimes.io "${name}" not found in namespace ${ns}`);
    throw err;
  }
}

function storeFailure(err: unknown, label: string): unknown {
  if (!isArtifactError(err)) return err;
  if (err.reason === 'ArtifactNotFound')
    return new ArtifactRequestError(
      404,
      'NotFound',
      `${label} is recorded in the Run's status but missing from the artifact store: ${err.message}`,
    );
  if (err.reason === 'ArtifactStoreError')
    return new ArtifactRequestError(
      503,
      'ServiceUnavailable',
      `the artifact store is unavailable, retry later: ${err.message}`,
    );
  return new ArtifactRequestError(500, 'InternalError', `${label} cannot be read: ${err.message}`);
}

async function serveList(client: KubeClient, req: Request, res: Response): Promise<void> {
  const ns = String(req.params.ns);
  const name = String(req.params.name);
  const run = await loadRun(client, ns, name);
  res.json({
    apiVersion: `${ARTIFACTS_GROUP}/v1alpha1`,
    kind: 'RunArtifactList',
    metadata: { name, namespace: ns },
    items: summarize(run.status?.artifactRefs ?? []),
  });
}

/** Objects up to this size are verified before the response starts, so a mismatch is a plain Status error. */
export const BUFFERED_BYTES = 1 << 20;

async function sendVerified(res: Response, body: Readable, ref: VerifiableRef, label: string): Promise<void> {
  const chunks: Buffer[] = [];
  const collect = new Writable({
    write(c: Buffer, _e, cb): void {
      chunks.push(c);
      cb();
    },
  });
  await pipeline(body, new VerifyingStream(ref.sizeBytes, ref.digest, label), collect).catch((err: unknown) => {
    if (err instanceof DigestMismatchError)
      throw new ArtifactRequestError(
        500,
        'InternalError',
        `${err.message}; the stored object was changed or damaged after upload and is not served`,
      );
    throw storeFailure(err, label);
  });
  res.writeHead(200, downloadHeaders(ref));
  res.end(Buffer.concat(chunks));
}

async function serveDownload(
  d: { client: KubeClient; tokens?: SessionTokens },
  req: Request,
  res: Response,
  log: Logger,
): Promise<void> {
  const { client } = d;
  const ns = String(req.params.ns);
  const name = String(req.params.name);
  const run = await loadRun(client, ns, name);
  const ref = pickRef(run.status?.artifactRefs ?? [], String(req.params.artifact), `${ns}/${name}`);
  const label = `artifact ${JSON.stringify(ref.name)} of Run ${ns}/${name}`;
  const spec = await storeSpecOf(client, ns, {
    name,
    ...(run.spec?.runtime ? { runtime: run.spec.runtime } : {}),
    ...(run.status?.artifactStore ? { snapshot: run.status.artifactStore } : {}),
  });
  const { store, close } = openStore(
    spec,
    d.tokens
      ? {
          client,
          tokens: d.tokens,
          namespace: ns,
          ...(run.spec?.runtime ? { runtime: run.spec.runtime } : {}),
          ...(run.status?.assignedPod ? { assignedPod: run.status.assignedPod } : {}),
        }
      : undefined,
  );
  try {
    const body = await store.open(ref, { namespace: ns }).catch((err: unknown) => {
      throw storeFailure(err, label);
    });
    if (ref.sizeBytes <= BUFFERED_BYTES) {
      await sendVerified(res, body, ref, label);
      return;
    }
    res.writeHead(200, downloadHeaders(ref));
    res.flushHeaders();
    // A failed check destroys the response before its last chunk: the client sees a cut download.
    await pipeline(body, new VerifyingStream(ref.sizeBytes, ref.digest, label), res).catch((err: unknown) => {
      log.error({ err, namespace: ns, run: name, artifact: ref.name }, 'artifact download aborted');
      res.destroy();
    });
  } finally {
    close();
  }
}

function handle(
  log: Logger,
  what: string,
  fn: (req: Request, res: Response) => Promise<void>,
): (req: Request, res: Response) => void {
  return (req, res) => {
    fn(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof ArtifactRequestError) {
        status(res, err.code, err.reason, err.message);
        return;
      }
      log.error({ err }, `${what} failed`);
      status(res, 500, 'InternalError', `${what} failed: ${err instanceof Error ? err.message : String(err)}`);
    });
  };
}

export function artifactsRouter(client: KubeClient, log: Logger, tokens?: SessionTokens): Router {
  const r = express.Router();
  const base = `/apis/${ARTIFACTS_GROUP}/v1alpha1/namespaces/:ns/runs/:name/artifacts`;
  r.get(
    base,
    validObjectPath,
    handle(log, 'listing the Run artifacts', (req, res) => serveList(client, req, res)),
  );
  r.get(
    `${base}/:artifact`,
    validObjectPath,
    handle(log, 'downloading the Run artifact', (req, res) =>
      serveDownload({ client, ...(tokens ? { tokens } : {}) }, req, res, log),
    ),
  );
  return r;
}
