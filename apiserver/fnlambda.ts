/**
 * The function side of the `lambda` transport: the Lambda handler that `aws-lambda-ric` runs in
 * the function's Lambda container image (lambda/Dockerfile). The event is a
 * FunctionInvocation envelope (lib/fn/wire.ts), exactly the body the webhook server accepts; the
 * result is the envelope with the response. Like the webhook server it holds no Kubernetes
 * credentials: the relay applies the operations as the function's ServiceAccount. A malformed
 * event is thrown as a `BadRequest` function error (the relay retries; nothing was applied).
 */
import type { Logger } from 'pino';
import type { WatchFunction } from '../lib/fn/types.ts';
import { serveInvocation, WIRE_API_VERSION, WIRE_KIND, type InvocationResponse } from '../lib/fn/wire.ts';
import { validRequest } from './fnserver.ts';

export interface LambdaResult {
  apiVersion: string;
  kind: string;
  response: InvocationResponse;
}

export class BadRequest extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadRequest';
  }
}

/** The handler of the functions this Lambda serves (one in production, all watch functions in tests). */
export function lambdaHandler(functions: WatchFunction[], log: Logger): (event: unknown) => Promise<LambdaResult> {
  const byName = new Map(functions.map((f) => [f.name, f]));
  return async (event) => {
    const name = (event as { request?: { function?: unknown } } | null)?.request?.function;
    const fn = typeof name === 'string' ? byName.get(name) : undefined;
    if (!fn) throw new BadRequest(`no function ${String(name)} is served here (${[...byName.keys()].join(', ')})`);
    const valid = validRequest(event, fn.name);
    if (typeof valid === 'string') throw new BadRequest(valid);
    const response = await serveInvocation(fn, valid);
    if (response.error?.type === 'Internal')
      log.error({ function: fn.name, key: valid.key, err: response.error.message }, 'handler failed');
    return { apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, response };
  };
}

/** The functions a Lambda serves: KRT_FUNCTIONS (comma-separated names), all watch functions when unset. */
export function servedFunctions(all: WatchFunction[], env: NodeJS.ProcessEnv): WatchFunction[] {
  const names = (env.KRT_FUNCTIONS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !all.some((f) => f.name === n));
  if (unknown.length) throw new Error(`KRT_FUNCTIONS: no watch function ${unknown.join(', ')}`);
  return names.length ? all.filter((f) => names.includes(f.name)) : all;
}
