/**
 * The HTTPS admission router: AdmissionReview (admission.k8s.io/v1) in, a handler call with a
 * bounded deadline, AdmissionReview out. A handler that throws or misses its deadline denies
 * the request (fail closed) with a message that says why.
 */
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import type { FnMetrics } from '../lib/fn/metrics.ts';
import type {
  AdmissionContext,
  AdmissionFunction,
  AdmissionRequest,
  AdmissionResult,
  Resource,
  Rule,
} from '../lib/fn/types.ts';

export const ADMISSION_PREFIX = '/admission/';

export interface AdmissionReview {
  apiVersion: string;
  kind: string;
  request?: AdmissionRequest;
  response?: unknown;
}

export function reviewResponse(uid: string, r: AdmissionResult): AdmissionReview {
  const response: Record<string, unknown> = { uid, allowed: r.allowed };
  if (!r.allowed)
    response.status = { code: r.code ?? 403, reason: r.reason ?? 'Forbidden', message: r.message ?? 'denied' };
  if (r.warnings?.length) response.warnings = r.warnings;
  if (r.patch?.length) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(r.patch)).toString('base64');
  }
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/** Runs the handler within deadlineMs; any failure denies. */
export async function decide(
  fn: AdmissionFunction,
  req: AdmissionRequest,
  ctx: Omit<AdmissionContext, 'signal'>,
  deadlineMs: number,
): Promise<AdmissionResult> {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<AdmissionResult>((resolve) => {
    timer = setTimeout(() => {
      abort.abort();
      resolve({
        allowed: false,
        code: 504,
        reason: 'Timeout',
        message: `${fn.name}: admission check did not finish within ${deadlineMs} ms; the request is rejected (fail closed), retry it`,
      });
    }, deadlineMs);
  });
  try {
    return await Promise.race([Promise.resolve(fn.handler(req, { ...ctx, signal: abort.signal })), deadline]);
  } catch (err) {
    return {
      allowed: false,
      code: 500,
      reason: 'InternalError',
      message: `${fn.name}: admission check failed: ${err instanceof Error ? err.message : String(err)}`,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** The API calls a handler may make, through `client` (the function's own identity). */
export function apiContext(client: KubeClient): Pick<AdmissionContext, 'post' | 'get'> {
  return {
    post: <T>(path: string, body: unknown): Promise<T> =>
      client.request<T>('POST', path, { body, contentType: 'application/json', timeoutMs: 2000 }),
    get: async <T extends KubeObject>(path: string): Promise<T | undefined> => {
      try {
        return await client.get<T>(path, { timeoutMs: 2000 });
      } catch (err) {
        if (isApiError(err, 404)) return undefined;
        throw err;
      }
    },
  };
}

const anyOf = (list: string[], v: string): boolean => list.includes('*') || list.includes(v);

/** Whether a function's own rules let it `get` this object (its cache reads stay within its RBAC). */
export function rulesAllowGet(rules: Rule[], r: Resource, name: string): boolean {
  return rules.some(
    (x) =>
      anyOf(x.apiGroups, r.group) &&
      anyOf(x.resources, r.resource) &&
      anyOf(x.verbs, 'get') &&
      (!x.resourceNames?.length || x.resourceNames.includes(name)),
  );
}

/** The cache reads of one function: only what its own rules let it `get`. */
function cachedFor(fn: AdmissionFunction, cached: AdmissionContext['cached']): Pick<AdmissionContext, 'cached'> {
  if (!cached) return {};
  return { cached: (r, ns, name) => (rulesAllowGet(fn.rbac, r, name) ? cached(r, ns, name) : undefined) };
}

/**
 * Serves each admission function at /admission/<name>; its handler's API calls go through
 * `clientFor(fn)`, the function's own ServiceAccount (never the server's identity); `cached` gives
 * handlers the watch relay's informer cache (AdmissionContext.cached).
 */
export function admissionRouter(
  functions: AdmissionFunction[],
  clientFor: (fn: AdmissionFunction) => KubeClient,
  log: Logger,
  metrics: FnMetrics,
  opts: { now?: () => Date; cached?: AdmissionContext['cached'] } = {},
): Router {
  const { now = () => new Date(), cached } = opts;
  const router = express.Router();
  router.use(express.json({ limit: '3mb' }));
  const byName = new Map(
    functions.map((f) => [f.name, { fn: f, api: { ...apiContext(clientFor(f)), ...cachedFor(f, cached) } }]),
  );
  router.post(`${ADMISSION_PREFIX}:name`, (req: Request, res: Response) => {
    const { fn, api } = byName.get(String(req.params.name)) ?? {};
    const review = req.body as AdmissionReview;
    if (!fn || !api || !review?.request?.uid) {
      res.status(fn ? 400 : 404).json({
        message: fn
          ? 'expected an admission.k8s.io/v1 AdmissionReview with request.uid'
          : `no admission function ${String(req.params.name)}`,
      });
      return;
    }
    const end = metrics.admissionTime.startTimer({ function: fn.name });
    const deadlineMs = Math.max(200, fn.trigger.timeoutSeconds * 1000 - 500);
    void decide(fn, review.request, { ...api, now: now() }, deadlineMs).then((result) => {
      end();
      metrics.admissionTotal.inc({ function: fn.name, allowed: String(result.allowed) });
      if (!result.allowed)
        log.info(
          {
            function: fn.name,
            user: review.request?.userInfo.username,
            name: review.request?.name,
            namespace: review.request?.namespace,
            reason: result.reason,
          },
          'admission denied',
        );
      res.json(reviewResponse(review.request!.uid, result));
    });
  });
  return router;
}
