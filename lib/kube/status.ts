/** The metav1.Status failure body that kruntimes' own HTTP servers answer, as the API server does. */
import type { ServerResponse } from 'node:http';

/** `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":…,"reason":…,"message":…}`. */
export function failureStatusJson(code: number, reason: string, message: string): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code, reason, message });
}

/** Writes a failure Status with its length; `headers` are added (e.g. WWW-Authenticate). */
export function writeFailureStatus(
  res: ServerResponse,
  code: number,
  reason: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body = failureStatusJson(code, reason, message);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
