/**
 * Sample cron function: deletes ConfigMaps labelled kruntimes.io/sample=sweep whose
 * kruntimes.io/expires-at annotation (RFC 3339) is in the past. The TTL-sweep pattern of
 * the Run and workspace TTLs, as a CronJob.
 */
import { R } from '../../lib/fn/resources.ts';
import type { CronInput, FunctionDef, Operation } from '../../lib/fn/types.ts';

export const EXPIRES_AT = 'kruntimes.io/expires-at';

export function sweepExpired({ state, now }: CronInput): Operation[] {
  return state
    .list(R.configMaps, undefined, { 'kruntimes.io/sample': 'sweep' })
    .filter((o) => {
      const at = Date.parse(o.metadata.annotations?.[EXPIRES_AT] ?? '');
      return Number.isFinite(at) && at <= now.getTime();
    })
    .map((o) => ({
      op: 'delete',
      resource: R.configMaps,
      namespace: o.metadata.namespace,
      name: o.metadata.name ?? '',
      uid: o.metadata.uid,
    }));
}

const fn: FunctionDef = {
  name: 'sample-sweep',
  description: 'Sample: deletes expired ConfigMaps labelled kruntimes.io/sample=sweep.',
  trigger: {
    type: 'cron',
    schedule: '*/5 * * * *',
    reads: [{ resource: R.configMaps, labelSelector: 'kruntimes.io/sample=sweep' }],
  },
  rbac: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'delete'] }],
  handler: sweepExpired,
};
export default fn;
