/** Reads the good and bad manifests of docs/crds.md, the CRD rule catalogue, for the e2e suite. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from '../localenv/paths.ts';

export type ExampleKind =
  'valid' | 'invalid' | 'valid update' | 'invalid update' | 'valid status update' | 'invalid status update';

export interface Example {
  section: string;
  kind: ExampleKind;
  title: string;
  /** Fragment the rejection message must contain (invalid kinds). */
  expect?: string;
  body: Record<string, unknown>;
}

const HEADER =
  /^\*\*(Valid|Invalid|Valid update|Invalid update|Valid status update|Invalid status update): (.+?)\*\*(.*)$/;

function yamlBlockAfter(lines: string[], from: number): { body: Record<string, unknown>; end: number } {
  let j = from;
  while (j < lines.length && !(lines[j] ?? '').startsWith('```yaml')) j++;
  let k = j + 1;
  while (k < lines.length && !(lines[k] ?? '').startsWith('```')) k++;
  return { body: parse(lines.slice(j + 1, k).join('\n')) as Record<string, unknown>, end: k };
}

export function parseExamples(markdown: string): Example[] {
  const lines = markdown.split('\n');
  const out: Example[] = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const sec = /^#{2,3} (\w+)\s*$/.exec(line);
    if (sec) {
      section = sec[1] ?? '';
      continue;
    }
    const m = HEADER.exec(line);
    if (!m) continue;
    const expect = /rejected with `([^`]+)`/.exec(m[3] ?? '')?.[1];
    const { body, end: k } = yamlBlockAfter(lines, i + 1);
    out.push({
      section,
      kind: (m[1] ?? '').toLowerCase() as ExampleKind,
      title: m[2] ?? '',
      ...(expect ? { expect } : {}),
      body,
    });
    i = k;
  }
  return out;
}

export function loadExamples(): Example[] {
  return parseExamples(readFileSync(join(REPO_ROOT, 'docs', 'crds.md'), 'utf8'));
}

export const PLURALS: Record<string, string> = {
  Runtime: 'runtimes',
  Run: 'runs',
  PersistentWorkspace: 'persistentworkspaces',
  Workflow: 'workflows',
  WorkflowRun: 'workflowruns',
  Action: 'actions',
};
