/**
 * The `lambda` transport's mapping of a FunctionInvocation onto the AWS Lambda Invoke API
 * (`POST /2015-03-31/functions/<FunctionName>/invocations`, InvocationType RequestResponse): the
 * event is the same `functions.kruntimes.io/v1alpha1` envelope the webhook transport POSTs, and
 * the function's result is the same envelope with the response. The Lambda Runtime Interface
 * Emulator serves the same path (with the function name `function`), so the relay speaks to the
 * emulator and to the real service alike. Pure: no I/O, no clock.
 */
import { TransientError } from './errors.ts';
import { WIRE_API_VERSION, WIRE_KIND, type InvocationRequest } from './wire.ts';

export const LAMBDA_INVOKE_PATH = '/2015-03-31/functions/{name}/invocations';

export interface LambdaHttpRequest {
  method: 'POST';
  /** Absolute URL of the invocation. */
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** The function's Lambda name: the template with `{function}` replaced by the watch function's name. */
export const lambdaName = (template: string, fn: string): string => template.replaceAll('{function}', fn);

/** The Invoke API request carrying one round of an invocation. */
export function lambdaRequest(endpoint: string, functionName: string, req: InvocationRequest): LambdaHttpRequest {
  const body = JSON.stringify({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: req });
  const path = LAMBDA_INVOKE_PATH.replace('{name}', encodeURIComponent(functionName));
  return {
    method: 'POST',
    url: `${endpoint.replace(/\/+$/, '')}${path}`,
    headers: {
      'content-type': 'application/json',
      'x-amz-invocation-type': 'RequestResponse',
      'x-amz-log-type': 'None',
    },
    body,
  };
}

/** The error a Lambda function reports (thrown by its handler, or the runtime's own). */
interface LambdaFunctionError {
  errorType?: string;
  errorMessage?: string;
}

/**
 * The function's answer from the Invoke API response: the body of a 200 without
 * X-Amz-Function-Error. Everything else (a throttle, a missing function, an error in the
 * function or its runtime, an emulator busy with another invocation) is a TransientError: nothing
 * was applied, and the relay retries with backoff.
 */
export function lambdaResult(
  fn: string,
  status: number,
  headers: Record<string, string | string[] | undefined>,
  text: string,
): string {
  // The AWS API marks a function error with X-Amz-Function-Error; the emulator answers the
  // runtime's error document ({errorType, errorMessage}) with a bare 200.
  const marked = headers['x-amz-function-error'];
  const e = status === 200 ? parseFunctionError(text) : {};
  if (status === 200 && !marked && e.errorType === undefined) return text;
  if (status === 200)
    throw new TransientError(
      `function ${fn}: Lambda ${String(marked ?? 'Unhandled')} error ${e.errorType ?? 'Unknown'}: ${e.errorMessage ?? text.slice(0, 200)}`,
    );
  const type = headers['x-amzn-errortype'];
  throw new TransientError(
    `function ${fn}: Lambda Invoke HTTP ${status}${type ? ` ${String(type)}` : ''}: ${text.slice(0, 200)}`,
  );
}

function parseFunctionError(text: string): LambdaFunctionError {
  try {
    const v = JSON.parse(text) as unknown;
    if (!v || typeof v !== 'object' || 'apiVersion' in v) return {};
    const { errorType, errorMessage } = v as Record<string, unknown>;
    return typeof errorType === 'string'
      ? { errorType, errorMessage: typeof errorMessage === 'string' ? errorMessage : '' }
      : {};
  } catch {
    return {};
  }
}
