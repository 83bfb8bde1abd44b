/**
 * Path parameters of the aggregated resources (logs, artifacts): the namespace must be a DNS-1123
 * label and the Run name a DNS-1123 subdomain, as the API server itself requires, before either
 * is put into a request path or a store key. Anything else is 400 BadRequest with a message
 * naming the parameter.
 */
import type { NextFunction, Request, Response } from 'express';
import { status } from './status.ts';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const shown = (v: string): string => JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v);

/** Why the namespace or name is unusable, or undefined. */
export function objectPathProblem(namespace: string, name: string): string | undefined {
  if (namespace.length > 63 || !DNS_LABEL.test(namespace))
    return `namespace ${shown(namespace)} is not a valid namespace name (a DNS-1123 label: at most 63 lowercase alphanumerics or '-')`;
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name))
    return `name ${shown(name)} is not a valid object name (a DNS-1123 subdomain: at most 253 lowercase alphanumerics, '-' or '.')`;
  return undefined;
}

/** Express middleware for routes with :ns and :name. */
export function validObjectPath(req: Request, res: Response, next: NextFunction): void {
  const problem = objectPathProblem(String(req.params.ns), String(req.params.name));
  if (problem) {
    status(res, 400, 'BadRequest', problem);
    return;
  }
  next();
}
