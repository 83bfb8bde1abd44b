import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { GROUP, X } from './api.ts';

const DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'crds', 'execution');
type Node = Record<string, unknown>;
interface Crd {
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string };
    versions: { name: string; subresources?: { status?: object }; schema: { openAPIV3Schema: Node } }[];
  };
}

const crds = readdirSync(DIR)
  .filter((f) => f.startsWith(`${GROUP}_`))
  .map((f) => parse(readFileSync(join(DIR, f), 'utf8')) as Crd);

function walk(node: Node, path: string, visit: (n: Node, p: string) => void): void {
  visit(node, path);
  for (const [k, v] of Object.entries((node.properties as Record<string, Node> | undefined) ?? {}))
    walk(v, `${path}.${k}`, visit);
  if (node.items) walk(node.items as Node, `${path}[]`, visit);
  if (node.additionalProperties && typeof node.additionalProperties === 'object')
    walk(node.additionalProperties as Node, `${path}{}`, visit);
}

describe('execution CRDs (crds/execution)', () => {
  it('define the four kinds the functions use, with a status subresource', () => {
    const byKind = new Map(crds.map((c) => [c.spec.names.kind, c]));
    for (const r of [X.jobClasses, X.jobs, X.kubernetesParameters, X.openSandboxParameters]) {
      const c = byKind.get(r.kind);
      assert.ok(c, r.kind);
      assert.deepEqual(
        [c.spec.group, c.spec.names.plural, c.spec.scope, c.spec.versions[0]?.name],
        [GROUP, r.resource, r.namespaced ? 'Namespaced' : 'Cluster', 'v1alpha1'],
      );
      assert.ok(c.spec.versions[0]?.subresources?.status, `${r.kind} has a status subresource`);
    }
    const kustomization = readFileSync(join(DIR, 'kustomization.yaml'), 'utf8');
    for (const f of readdirSync(DIR).filter((x) => x.startsWith(`${GROUP}_`)))
      assert.ok(kustomization.includes(f), `kustomization lists ${f}`);
  });

  it('are structural (every property typed) and every CEL rule has a message naming a field', () => {
    for (const c of crds) {
      walk(c.spec.versions[0]!.schema.openAPIV3Schema, c.spec.names.kind, (n, p) => {
        assert.ok(n.type || n['x-kubernetes-int-or-string'], `${p} has a type`);
        for (const r of (n['x-kubernetes-validations'] as { rule: string; message: string }[] | undefined) ?? []) {
          assert.match(r.message, /\b(spec|status)\.[a-zA-Z]/, `${p}: message names a field: ${r.message}`);
          assert.ok(r.rule.length > 0);
        }
      });
    }
  });

  it('carry the immutability and consistency rules of the design', () => {
    const all = crds.flatMap((c) => {
      const out: string[] = [];
      walk(c.spec.versions[0]!.schema.openAPIV3Schema, '', (n) => {
        for (const r of (n['x-kubernetes-validations'] as { message: string }[] | undefined) ?? []) out.push(r.message);
      });
      return out;
    });
    for (const m of [
      'spec.controllerName is immutable; create a new JobClass to switch controllers',
      'spec.parametersRef is immutable; create a new JobClass to change parameters objects',
      'spec.resources.requests.cpu must be less than or equal to spec.resources.limits.cpu',
      'spec.jobClassName is immutable',
      'status.resolvedJobClass is frozen once set',
      'status.effectiveResources cannot change once set',
      'status.execution.sandboxID cannot change once set',
      'status.execution.endpoint cannot change once a sandbox is recorded',
      'spec.endpoint must not contain credentials; use spec.apiKeySecretRef',
    ])
      assert.ok(all.includes(m), m);
  });
});
