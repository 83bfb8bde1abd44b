import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { Rule } from '../lib/fn/types.ts';
import { admissionFunctions, FUNCTION_SA_PREFIX, FUNCTIONS_DIR, loadFunctions, watchFunctions } from './functions.ts';

type Doc = {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Omit<Rule, 'scope'>[];
  roleRef?: { name: string };
  subjects?: { name: string }[];
  automountServiceAccountToken?: boolean;
};
const docs = (
  parseAllDocuments(
    readFileSync(join(resolve(FUNCTIONS_DIR, '..'), 'kustomize', 'base', 'generated', 'functions.yaml'), 'utf8'),
  ).map((d) => d.toJS() as Doc | null) ?? []
).filter((d): d is Doc => !!d);
const roles = (kind: string, name: string): Doc[] => docs.filter((d) => d.kind === kind && d.metadata.name === name);
const rulesOf = (name: string): Omit<Rule, 'scope'>[] =>
  ['ClusterRole', 'Role'].flatMap((k) => roles(k, name)).flatMap((d) => d.rules ?? []);
const sorted = (rs: Omit<Rule, 'scope'>[]): string[] => rs.map((r) => JSON.stringify(r)).sort();
const strip = (r: Rule): Omit<Rule, 'scope'> => ({
  apiGroups: r.apiGroups,
  resources: r.resources,
  verbs: r.verbs,
  ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
});

describe('generated RBAC: one identity per function (issue 13)', () => {
  it('every watch and admission function has a tokenless ServiceAccount bound to exactly its rules', async () => {
    const fns = await loadFunctions(FUNCTIONS_DIR);
    const hosted = [...watchFunctions(fns), ...admissionFunctions(fns)];
    assert.ok(admissionFunctions(fns).some((f) => f.name === 'jobclass-admission'));
    for (const fn of hosted) {
      const sa = `${FUNCTION_SA_PREFIX}${fn.name}`;
      const account = docs.find((d) => d.kind === 'ServiceAccount' && d.metadata.name === sa);
      assert.equal(account?.automountServiceAccountToken, false, `${sa}: a tokenless ServiceAccount`);
      assert.deepEqual(
        sorted(rulesOf(`kruntimes:fn:${fn.name}`)),
        sorted(fn.rbac.map(strip)),
        `${fn.name}: its declared rules`,
      );
      for (const kind of ['ClusterRoleBinding', 'RoleBinding'])
        for (const b of roles(kind, `kruntimes:fn:${fn.name}`))
          assert.deepEqual(
            b.subjects?.map((s) => s.name),
            [sa],
          );
    }
  });

  it("the extension server holds none of the functions' rules: it lists, watches and impersonates them by name", async () => {
    const fns = await loadFunctions(FUNCTIONS_DIR);
    const own = rulesOf('kruntimes:extension');
    const impersonated = own.filter((r) => r.verbs.includes('impersonate')).flatMap((r) => r.resourceNames ?? []);
    const hosted = [...watchFunctions(fns), ...admissionFunctions(fns)].map((f) => `${FUNCTION_SA_PREFIX}${f.name}`);
    assert.deepEqual([...impersonated].sort(), [...hosted].sort());
    for (const r of own) {
      const allowed =
        r.verbs.every((v) => v === 'list' || v === 'watch') ||
        (r.verbs.join() === 'impersonate' && r.resources.join() === 'serviceaccounts') ||
        r.resources.join() === 'leases';
      assert.ok(
        allowed,
        `kruntimes:extension may only list/watch, impersonate functions, and hold its Lease: ${JSON.stringify(r)}`,
      );
    }
  });
});
