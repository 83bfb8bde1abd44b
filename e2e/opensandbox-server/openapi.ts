/**
 * A small OpenAPI 3.1 request/response validator for the vendored OpenSandbox specs, written
 * for this test server (no ajv dependency). It supports the JSON Schema subset those specs use:
 * $ref (local), type (also type arrays and `nullable`), enum, properties, required,
 * additionalProperties, items, min/maxItems, min/maxLength, pattern, minimum/maximum,
 * oneOf/anyOf/allOf and the formats date-time, uuid and uri; parameters in path, query
 * (form/explode arrays, integer/boolean coercion) and header; JSON request bodies; responses by
 * status code (or `default`) with their JSON bodies and declared headers.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export type Schema = Record<string, unknown>;
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: Schema;
  $ref?: string;
}
interface MediaType {
  schema?: Schema;
}
interface Response {
  $ref?: string;
  content?: Record<string, MediaType>;
  headers?: Record<string, { $ref?: string; schema?: Schema }>;
}
interface Operation {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, MediaType> };
  responses?: Record<string, Response>;
  security?: unknown[];
}
type PathItem = Record<string, Operation | Parameter[] | undefined> & { parameters?: Parameter[] };
export interface OpenApiDoc {
  paths: Record<string, PathItem>;
  components?: Record<string, Record<string, unknown>>;
  security?: Record<string, unknown>[];
}

export interface Found {
  template: string;
  method: string;
  op: Operation;
  params: Record<string, string>;
  pathParams: Parameter[];
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

const typeMatches = (t: string, actual: string): boolean => t === actual || (t === 'number' && actual === 'integer');

export class SpecValidator {
  constructor(readonly doc: OpenApiDoc) {}

  static fromFile(path: string): SpecValidator {
    return new SpecValidator(parse(readFileSync(path, 'utf8')) as OpenApiDoc);
  }

  /** Resolves a local "#/a/b/c" reference. */
  deref<T>(node: T & { $ref?: string }): T {
    let cur: unknown = node;
    for (
      let i = 0;
      i < 32 && cur && typeof cur === 'object' && typeof (cur as { $ref?: unknown }).$ref === 'string';
      i++
    ) {
      const ref = (cur as { $ref: string }).$ref;
      if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref}`);
      cur = ref
        .slice(2)
        .split('/')
        .reduce<unknown>(
          (o, k) => (o as Record<string, unknown> | undefined)?.[k.replace(/~1/g, '/').replace(/~0/g, '~')],
          this.doc,
        );
      if (cur === undefined) throw new Error(`unresolved $ref ${ref}`);
    }
    return cur as T;
  }

  /** The operation for a method and a path relative to the server base (e.g. /sandboxes/abc). */
  find(method: string, path: string): Found | undefined {
    const m = method.toLowerCase();
    const segs = path.split('/');
    for (const [template, item] of Object.entries(this.doc.paths)) {
      const op = item[m] as Operation | undefined;
      if (!op || !METHODS.includes(m)) continue;
      const tsegs = template.split('/');
      if (tsegs.length !== segs.length) continue;
      const params: Record<string, string> = {};
      const ok = tsegs.every((t, i) => {
        const seg = segs[i] ?? '';
        const pm = /^\{(.+)\}$/.exec(t);
        if (pm) {
          params[pm[1]!] = decodeURIComponent(seg);
          return seg.length > 0;
        }
        return t === seg;
      });
      if (ok) return { template, method: m, op, params, pathParams: (item.parameters ?? []).map((p) => this.deref(p)) };
    }
    return undefined;
  }

  /** Validates a value against a schema; returns problems prefixed with `at`. */
  validate(schemaIn: Schema, value: unknown, at = '$'): string[] {
    const schema = this.deref(schemaIn);
    const out: string[] = [];
    const typeProblem = this.checkType(schema, value, at);
    if (typeProblem) return [typeProblem];
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value))
      out.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
    out.push(...this.combinators(schema, value, at));
    if (typeof value === 'string') out.push(...this.stringChecks(schema, value, at));
    if (typeof value === 'number') out.push(...this.numberChecks(schema, value, at));
    if (Array.isArray(value)) out.push(...this.arrayChecks(schema, value, at));
    else if (value && typeof value === 'object')
      out.push(...this.objectChecks(schema, value as Record<string, unknown>, at));
    return out;
  }

  private checkType(schema: Schema, value: unknown, at: string): string | undefined {
    const t = schema.type;
    if (t === undefined) return undefined;
    const types = Array.isArray(t) ? (t as string[]) : [t as string];
    if (schema.nullable === true) types.push('null');
    const actual = typeOf(value);
    return types.some((x) => typeMatches(x, actual))
      ? undefined
      : `${at}: expected ${types.join(' | ')}, got ${actual}`;
  }

  private combinators(schema: Schema, value: unknown, at: string): string[] {
    const out: string[] = [];
    for (const s of (schema.allOf as Schema[] | undefined) ?? []) out.push(...this.validate(s, value, at));
    const anyOf = schema.anyOf as Schema[] | undefined;
    if (anyOf && !anyOf.some((s) => this.validate(s, value, at).length === 0)) out.push(`${at}: matches none of anyOf`);
    const oneOf = schema.oneOf as Schema[] | undefined;
    if (oneOf) {
      const n = oneOf.filter((s) => this.validate(s, value, at).length === 0).length;
      if (n !== 1) out.push(`${at}: matches ${n} of oneOf (exactly one required)`);
    }
    return out;
  }

  private stringChecks(schema: Schema, v: string, at: string): string[] {
    const out: string[] = [];
    if (typeof schema.minLength === 'number' && [...v].length < schema.minLength)
      out.push(`${at}: shorter than ${schema.minLength}`);
    if (typeof schema.maxLength === 'number' && [...v].length > schema.maxLength)
      out.push(`${at}: longer than ${schema.maxLength}`);
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(v))
      out.push(`${at}: does not match ${schema.pattern}`);
    if (schema.format === 'date-time' && (!DATE_TIME.test(v) || Number.isNaN(Date.parse(v))))
      out.push(`${at}: not an RFC 3339 date-time`);
    if (schema.format === 'uuid' && !UUID.test(v)) out.push(`${at}: not a uuid`);
    if (schema.format === 'uri' && !URL.canParse(v)) out.push(`${at}: not a URI`);
    return out;
  }

  private numberChecks(schema: Schema, v: number, at: string): string[] {
    const out: string[] = [];
    if (typeof schema.minimum === 'number' && v < schema.minimum) out.push(`${at}: below minimum ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && v > schema.maximum) out.push(`${at}: above maximum ${schema.maximum}`);
    return out;
  }

  private arrayChecks(schema: Schema, v: unknown[], at: string): string[] {
    const out: string[] = [];
    if (typeof schema.minItems === 'number' && v.length < schema.minItems)
      out.push(`${at}: fewer than ${schema.minItems} items`);
    if (typeof schema.maxItems === 'number' && v.length > schema.maxItems)
      out.push(`${at}: more than ${schema.maxItems} items`);
    if (schema.items) v.forEach((x, i) => out.push(...this.validate(schema.items as Schema, x, `${at}[${i}]`)));
    return out;
  }

  private objectChecks(schema: Schema, v: Record<string, unknown>, at: string): string[] {
    const out: string[] = [];
    const props = (schema.properties as Record<string, Schema> | undefined) ?? {};
    for (const r of (schema.required as string[] | undefined) ?? []) if (!(r in v)) out.push(`${at}.${r}: required`);
    for (const [k, x] of Object.entries(v)) {
      if (props[k]) out.push(...this.validate(props[k], x, `${at}.${k}`));
      else if (schema.additionalProperties === false) out.push(`${at}.${k}: not allowed (additionalProperties: false)`);
      else if (schema.additionalProperties && typeof schema.additionalProperties === 'object')
        out.push(...this.validate(schema.additionalProperties as Schema, x, `${at}.${k}`));
    }
    return out;
  }

  /** Coerces a raw parameter string to the schema's type (integer/number/boolean), else keeps it. */
  private coerce(schema: Schema, raw: string): unknown {
    const s = this.deref(schema);
    if (s.type === 'integer' || s.type === 'number') return /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
    if (s.type === 'boolean') return raw === 'true' ? true : raw === 'false' ? false : raw;
    return raw;
  }

  private paramValue(
    p: Parameter,
    query: URLSearchParams,
    headers: Record<string, string | undefined>,
    path: Record<string, string>,
  ): unknown {
    const schema = this.deref(p.schema ?? {});
    if (p.in === 'path') return path[p.name] === undefined ? undefined : this.coerce(schema, path[p.name]!);
    if (p.in === 'header') {
      const h = headers[p.name.toLowerCase()];
      return h === undefined ? undefined : this.coerce(schema, h);
    }
    if (!query.has(p.name)) return undefined;
    if (schema.type === 'array') return query.getAll(p.name).map((x) => this.coerce((schema.items ?? {}) as Schema, x));
    return this.coerce(schema, query.get(p.name) ?? '');
  }

  /** Problems of a request: parameters (no undeclared query parameters), security header and JSON body. */
  validateRequest(
    found: Found,
    query: URLSearchParams,
    headers: Record<string, string | undefined>,
    body: { present: boolean; value?: unknown; json: boolean },
  ): string[] {
    const out: string[] = [];
    const declared = [...found.pathParams, ...(found.op.parameters ?? []).map((p) => this.deref(p))];
    for (const p of declared) {
      const v = this.paramValue(p, query, headers, found.params);
      if (v === undefined) {
        if (p.required || p.in === 'path') out.push(`${p.in} parameter ${p.name}: required`);
        continue;
      }
      if (p.schema) out.push(...this.validate(p.schema, v, `${p.in}.${p.name}`));
    }
    for (const k of new Set(query.keys()))
      if (!declared.some((p) => p.in === 'query' && p.name === k)) out.push(`query parameter ${k}: not declared`);
    out.push(...this.securityProblems(found, headers));
    const rb = found.op.requestBody;
    if (!rb) {
      if (body.present) out.push('request body: not expected');
      return out;
    }
    if (!body.present) {
      if (rb.required) out.push('request body: required');
      return out;
    }
    if (!body.json) return [...out, 'request body: content type must be application/json'];
    const schema = rb.content?.['application/json']?.schema;
    if (schema) out.push(...this.validate(schema, body.value, 'body'));
    return out;
  }

  private securityProblems(found: Found, headers: Record<string, string | undefined>): string[] {
    const reqs = (found.op.security ?? this.doc.security ?? []) as Record<string, unknown>[];
    if (!reqs.length) return [];
    const schemes = (this.doc.components?.securitySchemes ?? {}) as Record<
      string,
      { type: string; in?: string; name?: string }
    >;
    const satisfied = reqs.some((r) =>
      Object.keys(r).every((name) => {
        const s = schemes[name];
        return s?.type === 'apiKey' && s.in === 'header' && !!s.name && !!headers[s.name.toLowerCase()];
      }),
    );
    return satisfied ? [] : ['security: no credentials for any security requirement'];
  }

  /** Problems of a response for the found operation; `extra` adds responses the spec lacks (documented drift). */
  validateResponse(
    found: Found,
    status: number,
    headers: Record<string, string | undefined>,
    body: { present: boolean; value?: unknown },
    extra: Record<string, Response> = {},
  ): string[] {
    const declared = { ...(found.op.responses ?? {}), ...extra };
    const rawResp = declared[String(status)] ?? declared.default;
    if (!rawResp) return [`response ${status}: not declared for ${found.method.toUpperCase()} ${found.template}`];
    const resp = this.deref(rawResp);
    const out: string[] = [];
    for (const [name, h] of Object.entries(resp.headers ?? {})) {
      const value = headers[name.toLowerCase()];
      const hdr = this.deref(h);
      if (value !== undefined && hdr.schema)
        out.push(...this.validate(hdr.schema, this.coerce(hdr.schema, value), `header.${name}`));
    }
    const media = resp.content?.['application/json'];
    if (!media) return body.present ? [...out, `response ${status}: body not expected`] : out;
    if (!body.present) return [...out, `response ${status}: JSON body required`];
    if (media.schema) out.push(...this.validate(media.schema, body.value, `response${status}`));
    return out;
  }
}
