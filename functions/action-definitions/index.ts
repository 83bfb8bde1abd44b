/** Action definitions: accepted (Ready=True) or rejected with the first problem found. */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef } from '../../lib/fn/types.ts';
import { accept } from '../workflow-definitions/index.ts';

const fn: FunctionDef = {
  name: 'action-definitions',
  description: 'Marks Actions Ready (accepted) or not, with the problem found.',
  trigger: { type: 'watch', resource: R.actions },
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['actions'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['kruntimes.io'], resources: ['actions/status'], verbs: ['get', 'patch', 'update'] },
  ],
  handler: accept,
};
export default fn;
