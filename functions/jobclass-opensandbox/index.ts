/**
 * OpenSandbox adapter (controllerName execution.ayatori.ddupan.top/opensandbox): runs each
 * accepted Job as one OpenSandbox sandbox tagged with the Job UID, observes it by polling,
 * cancels and cleans up by deleting it (a finalizer holds Job deletion until the sandbox is
 * gone), probes each OpenSandboxExecutionParameters backend for its classes' Ready, and
 * protects parameters referenced by classes.
 *
 * Hosting: unlike the other functions this handler performs HTTP calls to OpenSandbox. The
 * decisions are pure (core.ts, outcome.ts, probe.ts); effects.ts runs at most one list plus one
 * create/delete per invocation through an injected client, and everything it changes in
 * Kubernetes is returned as ordinary operations. See docs/adr/0006-job-api.md.
 */
import { R } from '../../lib/fn/resources.ts';
import { keyOf, type FunctionDef, type ReconcileInput } from '../../lib/fn/types.ts';
import { OPENSANDBOX_CONTROLLER, X, type Job, type JobClass } from '../../lib/jobclass/api.ts';
import { isOpenSandboxJob } from './core.ts';
import { defaultDeps, reconcileWithEffects } from './effects.ts';
import { secretRefs, waitingJobs } from './reads.ts';

const fn: FunctionDef = {
  name: 'jobclass-opensandbox',
  description:
    'OpenSandbox JobClass adapter: creates exactly one tagged sandbox per accepted Job, observes, cancels and cleans it up; probes backends.',
  trigger: {
    type: 'watch',
    resource: X.jobs,
    filter: (e) => isOpenSandboxJob(e.object as Job),
    also: [
      { resource: X.openSandboxParameters, map: (o) => [`@params:${o.metadata.name ?? ''}`] },
      {
        resource: X.jobClasses,
        // A class change wakes the Jobs waiting for it under their own keys: the queue never runs
        // one key twice at once, so only one invocation at a time may create a Job's sandbox.
        map: (o, state) => {
          const c = o as JobClass;
          return c.spec.controllerName === OPENSANDBOX_CONTROLLER
            ? [...waitingJobs(state, c.metadata.name ?? '').map(keyOf), `@params:${c.spec.parametersRef.name}`]
            : [];
        },
      },
    ],
    // The API key, env and image pull Secrets and env ConfigMaps are read by name at call time
    // (never listed, watched or cached): a rotated key is used from the next call; see
    // docs/adr/0009-secrets-read-by-name.md. Waiting Jobs retry on their own.
    fetch: { resources: [R.secrets, R.configMaps], refs: secretRefs },
  },
  concurrency: 4,
  rbac: [
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobclasses'], verbs: ['get', 'list', 'watch'] },
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['opensandboxexecutionparameters'],
      verbs: ['get', 'list', 'watch', 'patch'],
    },
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['opensandboxexecutionparameters/status'],
      verbs: ['get', 'update', 'patch'],
    },
    { apiGroups: [''], resources: ['secrets', 'configmaps'], verbs: ['get'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: (input: ReconcileInput) => reconcileWithEffects(input, defaultDeps()),
};
export default fn;
