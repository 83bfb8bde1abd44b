/**
 * A user's first commands: the pinned kubectl resolves every kind of every kruntimes CRD group by
 * plural, singular, short and fully qualified name, for `get` and `explain`, while all three
 * aggregated APIs (logs, sessions, artifacts.kruntimes.io, which also publish a `runs` resource)
 * are installed and Available. The aggregated groups have a lower group priority than the CRD
 * groups, so `kubectl get runs` is the CRD and not `runs.artifacts.kruntimes.io`.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject } from '../lib/kube/types.ts';
import { admin, apiServiceAvailable, deleteNamespace, kubectl, newNamespace } from './helpers.ts';

type Crd = KubeObject & {
  spec: { group: string; names: { kind: string; plural: string; singular?: string; shortNames?: string[] } };
};

const CRD_GROUPS = ['kruntimes.io', 'execution.ayatori.ddupan.top'];
const AGGREGATED = ['logs.kruntimes.io', 'sessions.kruntimes.io', 'artifacts.kruntimes.io'];

/**
 * Names that a built-in group of higher priority also serves: kubectl resolves them to the
 * built-in, as it does for any CRD (the Ayatori `Job` next to `batch/v1` Job); the short and
 * fully qualified names reach the CRD.
 */
const BUILT_IN = new Map([
  [
    'execution.ayatori.ddupan.top',
    new Map([
      ['jobs', 'batch'],
      ['job', 'batch'],
    ]),
  ],
]);

interface Name {
  name: string;
  group: string;
  kind: string;
}

function namesOf(crd: Crd): Name[] {
  const { group, names } = crd.spec;
  const all = [names.plural, names.singular ?? names.kind.toLowerCase(), ...(names.shortNames ?? [])];
  const shadow = BUILT_IN.get(group);
  const out = [...new Set(all)].map((n) =>
    shadow?.has(n) ? { name: n, group: shadow.get(n) ?? '', kind: names.kind } : { name: n, group, kind: names.kind },
  );
  out.push({ name: `${names.plural}.${group}`, group, kind: names.kind });
  return out;
}

describe('kubectl resolves the kruntimes CRDs with all aggregated APIs installed', function () {
  let ns: string;
  let cacheDir: string;
  let crds: Crd[];
  before(async () => {
    for (const g of AGGREGATED) await apiServiceAvailable(g);
    ns = await newNamespace('kubectl');
    cacheDir = mkdtempSync(join(tmpdir(), 'krt-kubectl-cache-'));
    const all = await admin().list<Crd>('/apis/apiextensions.k8s.io/v1/customresourcedefinitions');
    crds = all.items.filter((c) => CRD_GROUPS.includes(c.spec.group));
  });
  after(async () => {
    rmSync(cacheDir, { recursive: true, force: true });
    await deleteNamespace(ns);
  });

  it('finds the CRDs of every group', () => {
    for (const g of CRD_GROUPS)
      assert.ok(
        crds.some((c) => c.spec.group === g),
        `CRDs of ${g} are installed`,
      );
    assert.ok(crds.some((c) => c.spec.names.plural === 'runs' && c.spec.group === 'kruntimes.io'));
  });

  it('`kubectl get` succeeds with plural, singular, short and qualified names', async () => {
    const failures: string[] = [];
    for (const n of crds.flatMap(namesOf)) {
      await kubectl(['--cache-dir', cacheDir, 'get', n.name, '-n', ns]).catch((e: Error) =>
        failures.push(`get ${n.name}: ${e.message.trim()}`),
      );
    }
    assert.deepEqual(failures, []);
  });

  it('`kubectl get run <name>` reads the CRD object', async () => {
    await admin().create(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: 'first' },
      spec: { runtime: 'none', source: { inline: 'true' } },
    });
    for (const name of ['run', 'runs', 'rn', 'runs.kruntimes.io']) {
      const out = JSON.parse(
        await kubectl(['--cache-dir', cacheDir, 'get', name, 'first', '-n', ns, '-o', 'json']),
      ) as {
        apiVersion: string;
        kind: string;
      };
      assert.deepEqual([out.apiVersion, out.kind], ['kruntimes.io/v1alpha1', 'Run'], name);
    }
  });

  it('`kubectl explain` explains the CRD kind for every name', async () => {
    const failures: string[] = [];
    for (const n of crds.flatMap(namesOf)) {
      const out = await kubectl(['--cache-dir', cacheDir, 'explain', n.name]).catch((e: Error) => e.message);
      const group = /^GROUP:\s*(\S+)/m.exec(out)?.[1] ?? '';
      const kind = /^KIND:\s*(\S+)/m.exec(out)?.[1] ?? '';
      if (group !== n.group || kind !== n.kind)
        failures.push(
          `explain ${n.name}: want ${n.group}/${n.kind}, got ${out.trim().split('\n').slice(0, 3).join(' | ')}`,
        );
    }
    assert.deepEqual(failures, []);
  });
});
