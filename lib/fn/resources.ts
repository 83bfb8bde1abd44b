/** Resource descriptors used by functions. */
import type { Resource } from './types.ts';

const core = (resource: string, kind: string, namespaced = true): Resource => ({
  group: '',
  version: 'v1',
  resource,
  kind,
  namespaced,
});
const krt = (resource: string, kind: string): Resource => ({
  group: 'kruntimes.io',
  version: 'v1alpha1',
  resource,
  kind,
  namespaced: true,
});

export const R = {
  configMaps: core('configmaps', 'ConfigMap'),
  secrets: core('secrets', 'Secret'),
  pods: core('pods', 'Pod'),
  events: core('events', 'Event'),
  serviceAccounts: core('serviceaccounts', 'ServiceAccount'),
  validatingWebhooks: {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    resource: 'validatingwebhookconfigurations',
    kind: 'ValidatingWebhookConfiguration',
    namespaced: false,
  },
  mutatingWebhooks: {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    resource: 'mutatingwebhookconfigurations',
    kind: 'MutatingWebhookConfiguration',
    namespaced: false,
  },
  apiServices: {
    group: 'apiregistration.k8s.io',
    version: 'v1',
    resource: 'apiservices',
    kind: 'APIService',
    namespaced: false,
  },
  daemonSets: { group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', namespaced: true },
  deployments: { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true },
  controllerRevisions: {
    group: 'apps',
    version: 'v1',
    resource: 'controllerrevisions',
    kind: 'ControllerRevision',
    namespaced: true,
  },
  runtimes: krt('runtimes', 'Runtime'),
  runs: krt('runs', 'Run'),
  persistentWorkspaces: krt('persistentworkspaces', 'PersistentWorkspace'),
  workflows: krt('workflows', 'Workflow'),
  workflowRuns: krt('workflowruns', 'WorkflowRun'),
  actions: krt('actions', 'Action'),
} satisfies Record<string, Resource>;
