/**
 * The pure admission review of dev.kruntimes.io objects (seed 002's 400/409 refusals): a refusal
 * is a DevwsError whose stable reason starts the message; the HTTP code is the seed's.
 */
import type { AdmissionResult } from '../../lib/fn/types.ts';
import { DevwsError, type Operation, type Project, type Workspace } from '../../lib/devws/api.ts';
import { assertRequestAllowed } from '../../lib/devws/lifecycle.ts';
import { assertPluginRequest } from '../../lib/devws/plugins.ts';
import { assertNoOperationInProgress, explicitRetry } from '../../lib/devws/operations.ts';
import { resolveBaseRef, validateDefaultBranch, validateRepositoryUrl } from '../../lib/devws/validate.ts';
import {
  fenceNodeReport,
  NODE_REPORT,
  NODE_SA,
  parseNodeReport,
  POD_NAME_EXTRA,
  readNodeReport,
  SANDBOX_SA_PREFIX,
  type FenceContext,
} from '../../lib/devws/node-report.ts';

export function denial(e: DevwsError): AdmissionResult {
  return { allowed: false, code: e.code, reason: e.code === 409 ? 'Conflict' : 'BadRequest', message: e.message };
}

/** Runs checks; a DevwsError becomes a denial, anything else propagates (the webhook fails closed). */
export function verdict(check: () => void): AdmissionResult {
  try {
    check();
    return { allowed: true };
  } catch (e) {
    if (e instanceof DevwsError) return denial(e);
    throw e;
  }
}

export function reviewProject(p: Project): AdmissionResult {
  return verdict(() => {
    validateRepositoryUrl(p.spec.repository.url);
    validateDefaultBranch(p.spec.repository.defaultBranch);
  });
}

/** A new Workspace: an isolated one implies a create_workspace operation (one per Project at a time) and a synced baseRef. */
export function reviewWorkspace(ws: Workspace, project: Project | undefined, ops: Operation[]): AdmissionResult {
  return verdict(() => {
    if (!project) throw new DevwsError('project_not_found', 400, `Project ${ws.spec.project} does not exist`);
    if (project.status?.lifecycle === 'deleting' || project.status?.lifecycle === 'deleted') {
      throw new DevwsError('project_deleting', 409, `Project ${ws.spec.project} is being deleted`);
    }
    if (ws.spec.kind === 'main') return; // created by the controller with its Project
    resolveBaseRef(ws.spec.baseRef, project.spec.repository.defaultBranch);
    assertNoOperationInProgress(ws.spec.project, ops);
  });
}

/** A new lifecycle Operation: one unfinished per Project, and the request must fit the Workspace. */
export function reviewOperation(op: Operation, ws: Workspace | undefined, ops: Operation[]): AdmissionResult {
  return verdict(() => {
    assertNoOperationInProgress(op.spec.project, ops, op.metadata.name);
    if (op.spec.kind === 'delete_project' || op.spec.kind === 'create_project') return;
    if (!ws || ws.spec.project !== op.spec.project) {
      throw new DevwsError(
        'workspace_not_found',
        400,
        `Workspace ${op.spec.workspace ?? ''} of Project ${op.spec.project} does not exist`,
      );
    }
    if (op.spec.kind !== 'create_workspace') assertRequestAllowed(op.spec.kind, ws);
    if (op.spec.kind === 'install_plugin' || op.spec.kind === 'remove_plugin') assertPluginRequest(op, ws);
  });
}

/** An explicit retry (spec.retryRequests bumped) is allowed only for a blocked or retry_wait operation. */
export function reviewRetry(op: Operation, old: Operation): AdmissionResult {
  if ((op.spec.retryRequests ?? 0) <= (old.spec.retryRequests ?? 0)) return { allowed: true };
  return verdict(() => {
    explicitRetry(old.status ?? {});
  });
}

export interface Requester {
  username: string;
  extra?: Record<string, string[]>;
}

const nodeUser = (ns: string): string => `system:serviceaccount:${ns}:${NODE_SA}`;

/**
 * The sandbox instance a Node writer speaks for, or undefined when the writer is no Node: the
 * Kubernetes substrate's Node holds a token of kruntimes-devws-node bound to its sandbox Pod (the
 * Pod's name, '' for an unbound token); an OpenSandbox sandbox's Node holds a token of the
 * ServiceAccount named by its sandbox instance ID (`ws-sbx-…`), which the controller creates with
 * the sandbox and deletes when it terminates it.
 */
export function nodeInstance(user: Requester, ns: string): string | undefined {
  if (user.username === nodeUser(ns)) return user.extra?.[POD_NAME_EXTRA]?.[0] ?? '';
  const prefix = `system:serviceaccount:${ns}:`;
  const name = user.username.startsWith(prefix) ? user.username.slice(prefix.length) : '';
  return name.startsWith(SANDBOX_SA_PREFIX) ? name : undefined;
}

/** Everything but the node-report annotation, as it must stay on a Node's write. */
function outsideReport(ws: Workspace): string {
  const annotations = { ...ws.metadata.annotations };
  delete annotations[NODE_REPORT];
  const m = ws.metadata;
  return JSON.stringify([ws.spec, m.labels ?? {}, annotations, m.finalizers ?? [], m.ownerReferences ?? []]);
}

/**
 * A Workspace update. The node-report annotation is the Node's narrowly scoped write: only the
 * Node identity may change it, only from the Workspace's live sandbox Pod (its Pod-bound token),
 * fenced by generation, admission epoch and clone dispatch (fenceNodeReport); the Node may change
 * nothing else. Anyone else may not touch the annotation (403 node_report_reserved).
 */
export function reviewWorkspaceUpdate(
  ws: Workspace,
  old: Workspace,
  user: Requester,
  operation?: FenceContext['operation'],
): AdmissionResult {
  const raw = ws.metadata.annotations?.[NODE_REPORT];
  const changed = raw !== old.metadata.annotations?.[NODE_REPORT];
  const instance = nodeInstance(user, ws.metadata.namespace ?? '');
  const isNode = instance !== undefined;
  if (!isNode && !changed) return { allowed: true };
  if (!isNode) return forbidden(`node_report_reserved: only the Workspace's Node may write ${NODE_REPORT}`);
  if (outsideReport(ws) !== outsideReport(old))
    return forbidden(`node_write_scope: the Node may change only the ${NODE_REPORT} annotation`);
  if (!changed) return { allowed: true };
  if (raw === undefined) return forbidden('node_write_scope: the Node may not remove its report');
  return verdict(() => {
    const previous = readNodeReport(old.metadata.annotations);
    fenceNodeReport(parseNodeReport(raw), {
      ws: old.status ?? {},
      podName: instance || undefined,
      operation,
      ...(previous ? { previous } : {}),
    });
  });
}

const forbidden = (message: string): AdmissionResult => ({ allowed: false, code: 403, reason: 'Forbidden', message });
