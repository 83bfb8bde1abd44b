/**
 * Every good and bad manifest of docs/crds.md against the real API server: valid ones are
 * accepted, invalid ones are rejected with the documented field path and message (creates,
 * spec updates and status updates).
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { readFileSync } from 'node:fs';
import { PatchType } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { loadExamples, PLURALS, type Example } from './crd-examples.ts';
import { admin, deleteNamespace, eventually, newNamespace } from './helpers.ts';

const GROUP = '/apis/kruntimes.io/v1alpha1';
const examples = loadExamples();

/** The CRDs were installed with kruntimes by the e2e cluster's `up` (kustomize local overlay). */
export async function installCrds(): Promise<void> {
  const dir = join(REPO_ROOT, 'crds');
  for (const f of readdirSync(dir).filter((x) => /^kruntimes\.io_.*\.yaml$/.test(x))) {
    const crd = parse(readFileSync(join(dir, f), 'utf8')) as KubeObject;
    await eventually(`CRD ${crd.metadata.name} Established`, async () => {
      const c = await admin().get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
      );
      return c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True');
    });
  }
}

function create(ns: string, obj: Record<string, unknown>): Promise<KubeObject> {
  const kind = String(obj.kind);
  return admin().create(`${GROUP}/namespaces/${ns}/${PLURALS[kind]}`, obj, { fieldValidation: 'Strict' });
}

async function rejected(p: Promise<unknown>, fragment: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isApiError(err), `expected an API error, got ${String(err)}`);
    assert.equal(err.code, 422, err.message);
    assert.ok(err.message.includes(fragment), `message\n  ${err.message}\ndoes not contain\n  ${fragment}`);
    return true;
  });
}

/** A valid Run naming a workspace needs it to exist (admission checks it; the schema alone does not). */
async function workspaceFor(ns: string, body: Record<string, unknown>): Promise<void> {
  const spec = body.spec as { runtime?: string; workspace?: { name: string } } | undefined;
  if (body.kind !== 'Run' || !spec?.workspace) return;
  await admin()
    .create(`${GROUP}/namespaces/${ns}/persistentworkspaces`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'PersistentWorkspace',
      metadata: { name: spec.workspace.name },
      spec: { runtime: spec.runtime },
    })
    .catch((e: unknown) => {
      if (!isApiError(e, 409)) throw e;
    });
}

function baseOf(section: string): Example {
  const base = examples.find((e) => e.section === section && e.kind === 'valid');
  if (!base) throw new Error(`docs/crds.md: section ${section} has no valid example to update`);
  return base;
}

describe('CRDs: the documented good and bad manifests against the real API server', function () {
  let ns: string;
  before(async () => {
    await installCrds();
    ns = await newNamespace('crds');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('documents enough cases to be meaningful', () => {
    assert.ok(examples.filter((e) => e.kind === 'valid').length >= 6);
    assert.ok(examples.filter((e) => e.kind.startsWith('invalid')).length >= 40);
    for (const e of examples.filter((x) => x.kind.startsWith('invalid')))
      assert.ok(e.expect, `${e.section}: ${e.title} has no expected message`);
  });

  let counter = 0;
  const uniq = (obj: Record<string, unknown>): Record<string, unknown> => {
    const meta = (obj.metadata ?? {}) as { name?: string };
    return { ...obj, metadata: { ...meta, name: `${meta.name ?? 'x'}-${++counter}` } };
  };

  for (const e of examples.filter((x) => x.kind === 'valid' || x.kind === 'invalid')) {
    it(`${e.section} ${e.kind}: ${e.title}`, async () => {
      if (e.kind === 'valid') {
        await workspaceFor(ns, e.body);
        const o = await create(ns, uniq(e.body));
        assert.equal(o.kind, e.body.kind);
      } else {
        await rejected(create(ns, e.body), e.expect ?? '');
      }
    });
  }

  for (const section of [
    ...new Set(examples.filter((x) => x.kind.endsWith(' update') && !x.kind.includes('status')).map((x) => x.section)),
  ]) {
    it(`${section}: spec updates are accepted or rejected as documented`, async () => {
      const created = await create(ns, uniq(baseOf(section).body));
      const path = `${GROUP}/namespaces/${ns}/${PLURALS[String(created.kind)]}/${created.metadata.name}`;
      for (const u of examples.filter(
        (x) => x.section === section && (x.kind === 'valid update' || x.kind === 'invalid update'),
      )) {
        if (u.kind === 'valid update') await admin().patch(path, u.body, PatchType.merge);
        else await rejected(admin().patch(path, u.body, PatchType.merge), u.expect ?? '');
      }
    });
  }

  for (const u of examples.filter((x) => x.kind.includes('status update'))) {
    it(`${u.section} ${u.kind}: ${u.title}`, async () => {
      const created = await create(ns, uniq(baseOf(u.section).body));
      const path = `${GROUP}/namespaces/${ns}/${PLURALS[String(created.kind)]}/${created.metadata.name}/status`;
      await admin().patch(path, u.body.old, PatchType.merge);
      if (u.kind === 'valid status update') await admin().patch(path, u.body.new, PatchType.merge);
      else await rejected(admin().patch(path, u.body.new, PatchType.merge), u.expect ?? '');
    });
  }
});
