/**
 * The repository is self-contained: no tracked file reads or links to the sibling `shared` folder that
 * sat beside the original checkout, to anything under /work, or (markdown) to a relative path
 * outside the repository. A clean clone must build, test and render its docs on its own.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SELF = relative(ROOT, fileURLToPath(import.meta.url));

/** References to the checkout's surroundings that a clean clone does not have. */
const OUTSIDE = [
  /\.\.\/shared\b/,
  /\bshared\/(DESIGN\.md|seeds|reference|opensandbox|hooks|bench-upstream)\b/,
  /(^|[\s'"`(=])\/work\//,
];

function trackedTextFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' });
  return out
    .split('\0')
    .filter((f) => f !== '' && f !== SELF)
    .filter((f) => !/\.(png|jpg|gif|ico|tgz|gz|wasm)$/.test(f));
}

function read(file: string): string | undefined {
  try {
    const text = readFileSync(join(ROOT, file), 'utf8');
    return text.includes('\0') ? undefined : text;
  } catch {
    return undefined; // deleted in the work tree, or a dangling link
  }
}

/** Relative markdown link targets of a document (`[x](target)`), without anchors. */
export function markdownLinks(text: string): string[] {
  const links: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = (m[1] ?? '').split('#')[0] ?? '';
    if (target !== '' && !/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push(target);
  }
  return links;
}

describe('repository is self-contained', () => {
  const files = trackedTextFiles();

  it('no tracked file references the sibling shared folder, the seeds folder or /work', () => {
    const hits: string[] = [];
    for (const file of files) {
      const text = read(file);
      if (text === undefined) continue;
      text.split('\n').forEach((line, i) => {
        if (OUTSIDE.some((re) => re.test(line))) hits.push(`${file}:${i + 1}: ${line.trim().slice(0, 120)}`);
      });
    }
    assert.deepEqual(hits, [], 'references outside the repository');
  });

  it('no markdown link points outside the repository', () => {
    const hits: string[] = [];
    for (const file of files.filter((f) => f.endsWith('.md'))) {
      for (const link of markdownLinks(read(file) ?? '')) {
        const target = resolve(ROOT, dirname(file), link);
        if (relative(ROOT, target).startsWith('..') || link.startsWith('/')) hits.push(`${file}: ${link}`);
      }
    }
    assert.deepEqual(hits, [], 'markdown links outside the repository');
  });

  it('finds a reference when one is there (the scan is not vacuous)', () => {
    assert.ok(files.length > 100, `git ls-files lists the repository (${files.length} files)`);
    assert.ok(OUTSIDE[0]?.test('see ' + '..' + '/shared/DESIGN.md'));
    assert.deepEqual(markdownLinks('[a](../x.md#y) [b](https://e.com) [c](docs/a.md)'), ['../x.md', 'docs/a.md']);
  });
});
