/**
 * krt artifact list | download over artifacts.kruntimes.io: only `get` on runs/artifacts is
 * needed. Downloads are written atomically and verified against the Run's recorded size and
 * sha256 (a mismatch leaves nothing behind); --extract unpacks directory archives with the
 * same safe extraction runtimed uses (absolute, `..`, link and special entries are refused).
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { artifactNameProblem } from '../../runtimed/artifacts/validate.ts';
import { extractArchive, writeStreamAtomically } from '../../runtimed/artifacts/extract.ts';
import { UsageError, type Conn } from '../kube.ts';

export interface ArtifactItem {
  name: string;
  type: string;
  sizeBytes: number;
  digest?: string;
  contentType?: string;
  driver?: string;
}
export interface Downloaded {
  name: string;
  path: string;
  sizeBytes: number;
  digest: string;
  extracted: boolean;
}

const base = (c: Conn, run: string): string =>
  `/apis/artifacts.kruntimes.io/v1alpha1/namespaces/${c.namespace}/runs/${encodeURIComponent(run)}/artifacts`;

export async function listArtifacts(c: Conn, run: string): Promise<ArtifactItem[]> {
  return (await c.client.request<{ items: ArtifactItem[] }>('GET', base(c, run))).items;
}

/** The artifacts to fetch: all, or the one named (unknown names are a usage error listing what exists). */
export function selectArtifacts(items: ArtifactItem[], name: string | undefined, run: string): ArtifactItem[] {
  for (const i of items) {
    const problem = artifactNameProblem(i.name);
    if (problem)
      throw new Error(`the server listed an unsafe artifact name ${JSON.stringify(i.name)} for Run ${run}: ${problem}`);
  }
  if (name === undefined) {
    if (!items.length) throw new UsageError(`Run ${run} has no artifacts`);
    return items;
  }
  const hit = items.filter((i) => i.name === name);
  if (!hit.length)
    throw new UsageError(
      `Run ${run} has no artifact ${JSON.stringify(name)}${items.length ? `; it has ${items.map((i) => i.name).join(', ')}` : ''}`,
    );
  return hit;
}

/** Where an artifact lands: files under their name, directory archives as <name>.tar.gz, or <name>/ when extracted. */
export function destination(outDir: string, item: ArtifactItem, extract: boolean): string {
  return join(outDir, item.type === 'directory' && !extract ? `${item.name}.tar.gz` : item.name);
}

async function fetchOne(
  c: Conn,
  run: string,
  item: ArtifactItem,
  o: { outDir: string; extract: boolean },
): Promise<Downloaded> {
  const label = `artifact ${JSON.stringify(item.name)} of Run ${run}`;
  if (!item.digest)
    throw new Error(`${label} has no recorded sha256 digest; it cannot be verified, so krt does not download it`);
  const res = await c.client.stream(`${base(c, run)}/${encodeURIComponent(item.name)}`, { accept: '*/*' });
  const expect = { expectedSize: item.sizeBytes, expectedDigest: item.digest, maxBytes: item.sizeBytes, label };
  const path = destination(o.outDir, item, o.extract);
  if (item.type !== 'directory' || !o.extract) {
    const w = await writeStreamAtomically(res, path, expect);
    return { name: item.name, path, ...w, extracted: false };
  }
  const tmp = await mkdtemp(join(o.outDir, '.krt-download-'));
  try {
    const w = await writeStreamAtomically(res, join(tmp, 'archive.tar.gz'), expect);
    await extractArchive(join(tmp, 'archive.tar.gz'), path);
    return { name: item.name, path, ...w, extracted: true };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

export async function downloadArtifacts(
  c: Conn,
  run: string,
  name: string | undefined,
  o: { outDir: string; extract: boolean },
): Promise<Downloaded[]> {
  const items = selectArtifacts(await listArtifacts(c, run), name, run);
  await mkdir(o.outDir, { recursive: true });
  const done: Downloaded[] = [];
  for (const item of items) done.push(await fetchOne(c, run, item, o));
  return done;
}
