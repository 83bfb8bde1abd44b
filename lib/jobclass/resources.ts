/**
 * Backend-neutral CPU/memory policy of a JobClass (seed rules 1-4): Job values win, unset values
 * come from the class defaults, the result must satisfy minimum/maximum and request <= limit,
 * and the resolved values are what the Job status records as effectiveResources. Comparisons
 * are exact (rational quantities), so 1Gi == 1024Mi and 0.5 == 500m.
 */
import { cmp, parseQuantity, type Rat } from '../kube/quantity.ts';
import type { CpuMemory, Requirements, ResourcePolicy } from './api.ts';

export const RESOURCES = ['cpu', 'memory'] as const;
export type ResourceName = (typeof RESOURCES)[number];
const SIDES = ['requests', 'limits'] as const;
type Side = (typeof SIDES)[number];

export type ResolveResult =
  | { ok: true; effective: Requirements }
  | { ok: false; reason: 'InvalidResources' | 'ResourcesOutOfPolicy'; message: string };

function quantity(value: string | undefined, where: string): { q?: Rat; problem?: string } {
  if (value === undefined) return {};
  const q = parseQuantity(value);
  if (!q) return { problem: `${where} ${JSON.stringify(value)} is not a quantity` };
  if (q.n < 0n) return { problem: `${where} ${value} must not be negative` };
  return { q };
}

const get = (r: Requirements | undefined, side: Side, res: ResourceName): string | undefined => r?.[side]?.[res];

const POLICY_ORDER: [string, string][] = [
  ['defaults.requests', 'defaults.limits'],
  ['minimum.requests', 'maximum.requests'],
  ['minimum.limits', 'maximum.limits'],
  ['minimum.requests', 'maximum.limits'],
  ['minimum.requests', 'defaults.requests'],
  ['defaults.requests', 'maximum.requests'],
  ['minimum.limits', 'defaults.limits'],
  ['defaults.limits', 'maximum.limits'],
];

/** Why a class resource policy is not self-consistent (InvalidResourcePolicy), or undefined. */
export function policyProblem(policy: ResourcePolicy | undefined): string | undefined {
  if (!policy) return undefined;
  for (const res of RESOURCES) {
    const vals = new Map<string, { raw: string; q: Rat }>();
    for (const block of ['defaults', 'minimum', 'maximum'] as const) {
      for (const side of SIDES) {
        const raw = get(policy[block], side, res);
        const { q, problem } = quantity(raw, `spec.resources.${block}.${side}.${res}`);
        if (problem) return problem;
        if (q && raw !== undefined) vals.set(`${block}.${side}`, { raw, q });
      }
    }
    for (const [a, b] of POLICY_ORDER) {
      const x = vals.get(a);
      const y = vals.get(b);
      if (x && y && cmp(x.q, y.q) > 0)
        return `spec.resources.${a}.${res} (${x.raw}) must not exceed spec.resources.${b}.${res} (${y.raw})`;
    }
  }
  return undefined;
}

/** The value of one side: the Job's, else the class default adjusted so a default never breaks request <= limit. */
function fill(
  job: Requirements | undefined,
  defaults: Requirements | undefined,
  res: ResourceName,
): { request?: string; limit?: string } {
  const reqJ = get(job, 'requests', res);
  const limJ = get(job, 'limits', res);
  let request = reqJ ?? get(defaults, 'requests', res);
  let limit = limJ ?? get(defaults, 'limits', res);
  const rq = request === undefined ? undefined : parseQuantity(request);
  const lq = limit === undefined ? undefined : parseQuantity(limit);
  if (rq && lq && cmp(rq, lq) > 0) {
    // Only a defaulted value is adjusted: a defaulted request is capped at the Job's limit, a
    // defaulted limit is raised to the Job's request. Two explicit values are left as they are.
    if (reqJ === undefined && limJ !== undefined) request = limJ;
    else if (limJ === undefined && reqJ !== undefined) limit = reqJ;
  }
  return { ...(request !== undefined ? { request } : {}), ...(limit !== undefined ? { limit } : {}) };
}

function boundsProblem(
  side: Side,
  res: ResourceName,
  value: string | undefined,
  policy: ResourcePolicy | undefined,
): string | undefined {
  const min = get(policy?.minimum, side, res);
  const max = get(policy?.maximum, side, res);
  if (value === undefined) {
    if (max !== undefined)
      return `spec.resources.${side}.${res} must be set: the JobClass maximum.${side}.${res} is ${max}`;
    if (min !== undefined)
      return `spec.resources.${side}.${res} must be set: the JobClass minimum.${side}.${res} is ${min}`;
    return undefined;
  }
  const v = parseQuantity(value)!;
  if (min !== undefined && cmp(v, parseQuantity(min)!) < 0)
    return `spec.resources.${side}.${res} ${value} is below the JobClass minimum ${min}`;
  if (max !== undefined && cmp(v, parseQuantity(max)!) > 0)
    return `spec.resources.${side}.${res} ${value} is above the JobClass maximum ${max}`;
  return undefined;
}

/** Resolves a Job's requests and limits against the class policy (which must be valid: see policyProblem). */
export function resolveResources(job: Requirements | undefined, policy: ResourcePolicy | undefined): ResolveResult {
  const requests: CpuMemory = {};
  const limits: CpuMemory = {};
  for (const res of RESOURCES) {
    for (const side of SIDES) {
      const { problem } = quantity(get(job, side, res), `spec.resources.${side}.${res}`);
      if (problem) return { ok: false, reason: 'InvalidResources', message: problem };
    }
    const { request, limit } = fill(job, policy?.defaults, res);
    if (request !== undefined && limit !== undefined && cmp(parseQuantity(request)!, parseQuantity(limit)!) > 0) {
      return {
        ok: false,
        reason: 'InvalidResources',
        message: `spec.resources.requests.${res} ${request} must not exceed spec.resources.limits.${res} ${limit}`,
      };
    }
    const problem = boundsProblem('requests', res, request, policy) ?? boundsProblem('limits', res, limit, policy);
    if (problem) return { ok: false, reason: 'ResourcesOutOfPolicy', message: problem };
    if (request !== undefined) requests[res] = request;
    if (limit !== undefined) limits[res] = limit;
  }
  return {
    ok: true,
    effective: {
      ...(Object.keys(requests).length ? { requests } : {}),
      ...(Object.keys(limits).length ? { limits } : {}),
    },
  };
}

/** Whether two quantities are numerically equal (e.g. "1Gi" and "1024Mi"). */
export function sameQuantity(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const x = parseQuantity(a);
  const y = parseQuantity(b);
  return !!x && !!y && cmp(x, y) === 0;
}
