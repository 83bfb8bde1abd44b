/**
 * The dev.kruntimes.io/v1alpha1 API (developer workspaces, ADR 0020) as the devws functions see
 * it: resource descriptors, object shapes generated from crds/dev/*.yaml, and the typed refusal
 * every rule of the pure core throws. This folder has no index.ts: it is a library.
 */
import type * as gen from '../api/generated/dev.ts';
import type { Resource } from '../fn/types.ts';
import type { KubeObject } from '../kube/types.ts';

export const GROUP = 'dev.kruntimes.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

const dev = (resource: string, kind: string): Resource => ({
  group: GROUP,
  version: VERSION,
  resource,
  kind,
  namespaced: true,
});

export const D = {
  projects: dev('projects', 'Project'),
  workspaces: dev('workspaces', 'Workspace'),
  operations: dev('operations', 'Operation'),
  leases: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true },
  pvcs: {
    group: '',
    version: 'v1',
    resource: 'persistentvolumeclaims',
    kind: 'PersistentVolumeClaim',
    namespaced: true,
  },
  pods: { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true },
  configMaps: { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true },
  serviceAccounts: { group: '', version: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true },
  roleBindings: {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'rolebindings',
    kind: 'RoleBinding',
    namespaced: true,
  },
} satisfies Record<string, Resource>;

export type ProjectSpec = gen.Project['spec'];
export type ProjectStatus = NonNullable<gen.Project['status']>;
export type WorkspaceSpec = gen.Workspace['spec'];
export type WorkspaceStatus = NonNullable<gen.Workspace['status']>;
export type ObservedState = NonNullable<WorkspaceStatus['observedState']>;
export type SandboxInstance = NonNullable<WorkspaceStatus['sandbox']>;
export type NodeInstance = NonNullable<WorkspaceStatus['node']>;
export type OperationSpec = gen.Operation['spec'];
export type OperationStatus = NonNullable<gen.Operation['status']>;
export type OperationKind = OperationSpec['kind'];
export type OperationState = NonNullable<OperationStatus['state']>;
export type Step = NonNullable<OperationStatus['step']>;
export type Effect = NonNullable<OperationStatus['effects']>[number];
export type EffectKind = Effect['kind'];
export type CloneInput = NonNullable<OperationStatus['cloneInput']>;

export interface Project extends KubeObject {
  spec: ProjectSpec;
  status?: ProjectStatus;
}
export interface Workspace extends KubeObject {
  spec: WorkspaceSpec;
  status?: WorkspaceStatus;
}
export interface Operation extends KubeObject {
  spec: OperationSpec;
  status?: OperationStatus;
}

/**
 * A refusal with the seed's stable reason and the HTTP code it maps to (400 bad input, 409
 * conflict with current state). Admission turns it into a denial; the controller into a deferral
 * or a failure of the operation.
 */
export class DevwsError extends Error {
  constructor(
    readonly reason: string,
    readonly code: 400 | 409,
    message: string,
  ) {
    super(`${reason}: ${message}`);
    this.name = 'DevwsError';
  }
}
