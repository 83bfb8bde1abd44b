import assert from 'node:assert/strict';
import type { Job } from '../../lib/jobclass/api.ts';
import { FakeState, R, X, acceptedOpenSandboxJob, jobClass, osParams } from '../../lib/jobclass/testing.ts';
import fn from './index.ts';
import { secretRefs } from './reads.ts';

describe('jobclass-opensandbox: Secrets read by name', () => {
  const state = new FakeState([
    [X.jobClasses, jobClass('microvm', { controller: 'opensandbox' })],
    [X.openSandboxParameters, osParams('microvm')],
  ]);
  const refs = (key: string, object?: Job): string[] =>
    secretRefs({ key, object, state }).map((r) => `${r.namespace ?? ''}/${r.name}`);
  const env = {
    env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } }],
    imagePullSecret: { name: 'regcred' },
  };

  it('reads the API key Secret, and the env and pull Secrets only until the sandbox exists', () => {
    const waiting = acceptedOpenSandboxJob(env);
    assert.deepEqual(refs('team-a/train', waiting), ['ayatori-system/opensandbox-api', 'team-a/db', 'team-a/regcred']);
    const running: Job = {
      ...waiting,
      status: {
        ...waiting.status,
        execution: { controllerName: 'execution.ayatori.ddupan.top/opensandbox', sandboxID: 'sb-1' },
      },
    };
    assert.deepEqual(refs('team-a/train', running), ['ayatori-system/opensandbox-api']);
    assert.deepEqual(refs('@params:microvm'), ['ayatori-system/opensandbox-api']);
    assert.deepEqual(refs('@params:missing'), []);
  });

  it('needs get on Secrets only: no Secret watch, no list', () => {
    assert.equal(fn.trigger.type === 'watch' && fn.trigger.also?.some((a) => a.resource === R.secrets), false);
    assert.deepEqual(
      fn.rbac.filter((r) => r.resources.includes('secrets')).map((r) => r.verbs),
      [['get']],
    );
  });
});
