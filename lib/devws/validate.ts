/**
 * Project and Workspace input rules (seed 002 "Project" and "Workspace"): the repository URL,
 * the default branch, Git ref names and the isolated Workspace's baseRef. Pure, no I/O.
 */
import { DevwsError } from './api.ts';
import { SCP_LIKE } from './ssh.ts';

/** https or ssh only; no query, fragment or embedded password (400 invalid_repository_url). */
export function validateRepositoryUrl(url: string): void {
  const bad = (why: string): never => {
    throw new DevwsError('invalid_repository_url', 400, `repository URL ${why}`);
  };
  if (/[\s]/.test(url)) bad('may not contain whitespace');
  if (url.includes('?')) bad('may not contain a query');
  if (url.includes('#')) bad('may not contain a fragment');
  if (SCP_LIKE.test(url)) return;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return bad('is not a URL (https://host/path or ssh://host/path)');
  }
  if (u.protocol !== 'https:' && u.protocol !== 'ssh:') bad(`scheme ${u.protocol} is not https or ssh`);
  if (u.password) bad('may not embed a password');
  if (!u.hostname) bad('has no host');
  if (u.pathname === '' || u.pathname === '/') bad('has no repository path');
}

/**
 * A valid Git branch name, as `git check-ref-format --branch` accepts it (400 invalid_ref).
 * Full refs (refs/...) are refused: the binding syncs one literal short branch name.
 */
export function validateRefName(ref: string): void {
  const bad = (why: string): never => {
    throw new DevwsError('invalid_ref', 400, `ref "${ref}" ${why}`);
  };
  if (ref === '' || ref === '@') bad('is empty or "@"');
  if (ref.startsWith('-') || ref.startsWith('/') || ref.endsWith('/') || ref.endsWith('.'))
    bad('has a bad start or end');
  if (ref.startsWith('refs/')) bad('is a full ref; give the short branch name');
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(ref)) bad('contains a character Git refuses');
  if (ref.includes('..') || ref.includes('//') || ref.includes('@{')) bad('contains "..", "//" or "@{"');
  for (const part of ref.split('/')) {
    if (part.startsWith('.') || part.endsWith('.lock')) bad(`has a component "${part}" Git refuses`);
  }
}

/** The default branch is a concrete branch: HEAD is refused (400 default_branch_required). */
export function validateDefaultBranch(branch: string | undefined): string {
  const b = (branch ?? '').trim();
  if (b === '' || b === 'HEAD') {
    throw new DevwsError('default_branch_required', 400, 'the default branch must be a concrete branch name, not HEAD');
  }
  validateRefName(b);
  return b;
}

/**
 * An isolated Workspace's baseRef may be absent, empty, HEAD or the binding branch; anything else
 * is 400 base_ref_not_synced and nothing is recorded. Returns the requested ref.
 */
export function resolveBaseRef(baseRef: string | undefined, defaultBranch: string): string {
  const r = baseRef ?? '';
  if (r === '' || r === 'HEAD' || r === defaultBranch) return defaultBranch;
  throw new DevwsError(
    'base_ref_not_synced',
    400,
    `only the binding branch "${defaultBranch}" is synced; baseRef "${r}" would get its content under another name`,
  );
}

/** The Workspace's branch on the Git Server. */
export function workspaceBranch(workspaceId: string, requestedRef: string): string {
  return `refs/heads/workspaces/${workspaceId}/${requestedRef}`;
}

/** The requested ref a Workspace branch names (its short name), or undefined when it is not this Workspace's. */
export function requestedRefOf(branch: string, workspaceId: string): string | undefined {
  const prefix = workspaceBranch(workspaceId, '');
  return branch.startsWith(prefix) && branch.length > prefix.length ? branch.slice(prefix.length) : undefined;
}
