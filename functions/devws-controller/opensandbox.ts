/**
 * The OpenSandbox substrate (ADR 0020, "Substrate"): a Workspace's sandbox is one OpenSandbox
 * sandbox running the Node (`kruntimes devws-node`) with the Workspace's data on an OpenSandbox
 * named volume; the Lifecycle API client is the JobClass adapter's (lib/opensandbox).
 *
 * The API has no idempotency key, so the effect ID travels as sandbox metadata
 * (`dev.kruntimes.io/sandbox-id`) and "get by ID without creating" is a list filtered by it. Every
 * invocation lists the Project's sandboxes once (by `dev.kruntimes.io/project-uid`) before the
 * steps decide; a failed list is never read as "absent": nothing is decided. A create is sent only
 * for an effect durably planned, only while no sandbox carries its ID, and only within
 * SEND_WINDOW_MS of the effect's sentAt (written with the plan); after that, nothing is created
 * until a create sent in the window has had LANDING_MS to land (a timeout is never read as "did
 * not happen"), then a new sentAt is written. Should two creates land anyway, the oldest sandbox
 * is the one and the others are deleted. Terminated means the server reports a terminal state.
 * Workspace data is deleted by a wipe sandbox (its own effect ID) that empties the volume; the
 * effect records removed=true once that sandbox has terminated with reason `completed`.
 *
 * The Node's identity: a ServiceAccount named by the sandbox instance ID, bound to the Node
 * ClusterRole, applied with the plan (before any create) and deleted with the terminate call, so
 * that a terminated generation's token stops authenticating at once; devws-admission fences its
 * reports exactly as a Pod's. How its token reaches a real OpenSandbox sandbox is not built (the
 * controller cannot request tokens; see docs/workspaces-dev.md).
 */
import { D, type Effect, type Workspace } from '../../lib/devws/api.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import type { SandboxApi } from '../../lib/opensandbox/client.ts';
import type { CreateSandboxRequest, Sandbox } from '../../lib/opensandbox/types.ts';
import {
  HOME,
  NODE_IMAGE,
  nodeBinding,
  WORKSPACE_LABEL,
  type CreateGate,
  type SandboxOptions,
  type SandboxView,
  type Substrate,
} from './substrate.ts';

export const META = {
  project: 'dev.kruntimes.io/project-uid',
  workspace: 'dev.kruntimes.io/workspace-uid',
  sandbox: 'dev.kruntimes.io/sandbox-id',
  node: 'dev.kruntimes.io/node-id',
  role: 'dev.kruntimes.io/role',
} as const;
/** A create may be sent only this long after the effect's sentAt. */
export const SEND_WINDOW_MS = 15_000;
/** How long a create sent in the window may still take to land (the client's create timeout and a margin). */
export const CREATE_TIMEOUT_MS = 45_000;
export const LANDING_MS = CREATE_TIMEOUT_MS + 15_000;
const TERMINAL = new Set(['Terminated', 'Failed']);

export interface OpenSandboxSettings {
  /** The sandbox image: the kruntimes image (the Node and git); the dev tools live in it too. */
  image: string;
  resourceLimits: Record<string, string>;
}

export const DEFAULT_SETTINGS: OpenSandboxSettings = {
  image: NODE_IMAGE,
  resourceLimits: { cpu: '1', memory: '2Gi' },
};

/** A call the handler makes after the decision (the decision itself does no I/O). */
export type Call =
  { kind: 'create'; id: string; request: CreateSandboxRequest } | { kind: 'delete'; id: string; externalId: string };

interface Found {
  s: Sandbox;
  view: SandboxView;
  reason?: string;
}

const dataVolume = (ws: Workspace): string => `devws-${ws.metadata.uid ?? ws.metadata.name ?? ''}`.slice(0, 63);

function found(id: string, s: Sandbox): Found {
  const nodeId = s.metadata?.[META.node];
  return {
    s,
    view: {
      id,
      externalId: s.id,
      ready: s.status.state === 'Running',
      terminated: TERMINAL.has(s.status.state),
      ...(nodeId ? { nodeId } : {}),
    },
    ...(s.status.reason ? { reason: s.status.reason } : {}),
  };
}

/** The Node's identity: the ServiceAccount named by the sandbox instance ID, bound to the Node ClusterRole. */
export function sandboxIdentity(ws: Workspace, id: string): FnOp[] {
  const labels = { [WORKSPACE_LABEL]: ws.metadata.name ?? '', 'app.kubernetes.io/component': 'devws-node' };
  return nodeBinding(ws.metadata.namespace ?? '', id, labels);
}

const byAge = (a: Sandbox, b: Sandbox): number =>
  (a.createdAt ?? '').localeCompare(b.createdAt ?? '') || a.id.localeCompare(b.id);

export class OpenSandboxSubstrate implements Substrate {
  readonly kind = 'opensandbox' as const;
  /** The calls the decision asked for, run by the handler afterwards. */
  readonly calls: Call[] = [];
  private readonly byId = new Map<string, Sandbox[]>();

  /** `listing`: the Project's sandboxes, listed in this invocation before anything is decided. */
  constructor(
    listing: Sandbox[],
    private readonly project: { uid: string; namespace: string },
    private readonly settings: OpenSandboxSettings = DEFAULT_SETTINGS,
  ) {
    for (const s of listing) {
      const id = s.metadata?.[META.sandbox];
      if (!id || s.metadata?.[META.project] !== project.uid) continue; // a server ignoring the filter adopts nothing
      this.byId.set(id, [...(this.byId.get(id) ?? []), s].sort(byAge));
    }
  }

  /** The sandbox an effect ID names: the oldest that carries it (a wipe: a completed one first, else a live one). */
  private find(id: string): Found | undefined {
    const all = this.byId.get(id) ?? [];
    const wipe = all[0]?.metadata?.[META.role] === 'data-wipe';
    const pick = wipe
      ? (all.find((s) => s.status.state === 'Terminated' && s.status.reason === 'completed') ??
        all.find((s) => !TERMINAL.has(s.status.state)) ??
        all[0])
      : all[0];
    return pick ? found(id, pick) : undefined;
  }

  sandbox(id: string): SandboxView | undefined {
    return this.find(id)?.view;
  }

  createGate(e: Effect, now: Date): CreateGate {
    const sent = e.sentAt ? Date.parse(e.sentAt) : NaN;
    if (!Number.isFinite(sent)) return 'renew';
    const age = now.getTime() - sent;
    if (age <= SEND_WINDOW_MS) return 'send';
    return age < SEND_WINDOW_MS + LANDING_MS ? 'wait' : 'renew';
  }

  planFields(now: Date): Partial<Effect> {
    return { sentAt: now.toISOString() };
  }

  ensure(ws: Workspace, id: string, o: SandboxOptions, planned: Effect | undefined): FnOp[] {
    const identity = sandboxIdentity(ws, id);
    if (!planned || this.find(id)) return identity;
    this.calls.push({ kind: 'create', id, request: this.sandboxRequest(ws, id, o) });
    return identity;
  }

  terminate(v: SandboxView): FnOp[] {
    this.calls.push({ kind: 'delete', id: v.id, externalId: v.externalId });
    const ns = this.project.namespace;
    return [
      { op: 'delete', resource: D.serviceAccounts, namespace: ns, name: v.id },
      { op: 'delete', resource: D.roleBindings, namespace: ns, name: v.id },
    ];
  }

  hasData(_ws: Workspace, effect: Effect | undefined): boolean {
    const w = effect ? this.find(effect.id) : undefined;
    return !(w?.view.terminated && w.s.status.state === 'Terminated' && w.reason === 'completed');
  }

  deleteData(ws: Workspace, planned: Effect): FnOp[] {
    const w = this.find(planned.id);
    if (w && !w.view.terminated) return []; // the wipe runs
    this.calls.push({ kind: 'create', id: planned.id, request: this.wipeRequest(ws, planned.id) });
    return [];
  }

  /** Younger sandboxes that carry an ID already carried by an older one (two creates landed): deleted. */
  duplicates(): Call[] {
    const out: Call[] = [];
    for (const [id, all] of this.byId) {
      const keep = this.find(id)?.s.id;
      for (const s of all) {
        if (s.id !== keep && !TERMINAL.has(s.status.state)) out.push({ kind: 'delete', id, externalId: s.id });
      }
    }
    return out;
  }

  private metadata(ws: Workspace, id: string, role: 'sandbox' | 'data-wipe'): Record<string, string> {
    return {
      [META.project]: this.project.uid,
      [META.workspace]: ws.metadata.uid ?? '',
      [META.sandbox]: id,
      [META.role]: role,
      ...(role === 'sandbox' ? { [META.node]: `${id}-node` } : {}),
    };
  }

  private volumes(ws: Workspace): CreateSandboxRequest['volumes'] {
    return [{ name: 'home', mountPath: HOME, pvc: { claimName: dataVolume(ws), createIfNotExists: true } }];
  }

  /** The Node is the sandbox's entrypoint; it is told its identity as the Pod's Node is (POD_NAME = the instance ID). */
  sandboxRequest(ws: Workspace, id: string, o: SandboxOptions): CreateSandboxRequest {
    const env: Record<string, string> = {
      POD_NAME: id,
      POD_NAMESPACE: ws.metadata.namespace ?? '',
      KRT_NODE_ID: `${id}-node`,
      KRT_WORKSPACE: ws.metadata.name ?? '',
      KRT_GENERATION: String(o.generation),
      HOME,
    };
    return {
      image: { uri: this.settings.image },
      entrypoint: ['kruntimes', 'devws-node'],
      env,
      resourceLimits: this.settings.resourceLimits,
      metadata: this.metadata(ws, id, 'sandbox'),
      volumes: this.volumes(ws),
    };
  }

  wipeRequest(ws: Workspace, id: string): CreateSandboxRequest {
    return {
      image: { uri: this.settings.image },
      entrypoint: ['find', HOME, '-mindepth', '1', '-delete'],
      resourceLimits: this.settings.resourceLimits,
      metadata: this.metadata(ws, id, 'data-wipe'),
      volumes: this.volumes(ws),
    };
  }
}

/** The Project's sandboxes (get by ID without creating, for every ID at once); undefined when the server did not answer. */
export async function observeProject(
  api: SandboxApi,
  projectUid: string,
): Promise<{ ok: true; sandboxes: Sandbox[] } | { ok: false; error: string }> {
  try {
    return { ok: true, sandboxes: await api.listAll({ metadata: { [META.project]: projectUid } }) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Runs the decision's calls, then deletes duplicates. A failure is only logged: the next
 * invocation lists again, and a create whose answer was lost is found there by its ID.
 */
export async function perform(
  api: SandboxApi,
  calls: Call[],
  log: (msg: string) => void = () => undefined,
): Promise<void> {
  for (const c of calls) {
    try {
      if (c.kind === 'create') await api.create(c.request);
      else await api.delete(c.externalId);
    } catch (err) {
      log(`${c.kind} ${c.id}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
