/**
 * `krt wf trigger <workflow> --set key=value` (the upstream Go krt's flag) binds the input like
 * `--input`: the WorkflowRun created carries the value in its rendered jobs. The real krt CLI
 * against the real API server; nothing needs to run for this, so no Runtime is created.
 */
import assert from 'node:assert/strict';
import { cluster } from './cluster.ts';
import { admin, deleteNamespace, newNamespace } from './helpers.ts';
import { krt } from './krt.ts';

const G = '/apis/kruntimes.io/v1alpha1';
type Wfr = { metadata: { name: string }; spec: { jobs: Record<string, { steps: { run?: string }[] }> } };

describe('krt wf trigger --set', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('krt-wf');
    await admin().create(`${G}/namespaces/${ns}/workflows`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'greeter' },
      spec: {
        inputs: { who: { required: true }, mood: { default: 'calm' } },
        jobs: {
          say: {
            'runs-on': 'bash',
            steps: [{ name: 'hello', run: 'echo "hello ${{ inputs.who }} ${{ inputs.mood }}"' }],
          },
        },
      },
    });
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  const trigger = async (name: string, flags: string[]): Promise<Wfr> => {
    const r = await krt(['-n', ns, 'wf', 'trigger', 'greeter', '--name', name, ...flags], cluster().kubeconfig);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), name);
    return admin().get<Wfr & { apiVersion: string; kind: string }>(`${G}/namespaces/${ns}/workflowruns/${name}`);
  };

  it('binds --set key=value into the WorkflowRun', async () => {
    const w = await trigger('with-set', ['--set', 'who=world']);
    assert.equal(w.spec.jobs.say?.steps[0]?.run, 'echo "hello world calm"');
  });

  it('accepts --set and --input together (repeatable)', async () => {
    const w = await trigger('with-both', ['--set', 'who=there', '--input', 'mood=happy']);
    assert.equal(w.spec.jobs.say?.steps[0]?.run, 'echo "hello there happy"');
  });

  it('rejects --set without NAME=VALUE, creating nothing', async () => {
    const r = await krt(['-n', ns, 'wf', 'trigger', 'greeter', '--name', 'bad', '--set', 'who'], cluster().kubeconfig);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /who: use NAME=VALUE/);
    const list = await admin().list(`${G}/namespaces/${ns}/workflowruns`);
    assert.deepEqual(list.items.map((i) => i.metadata.name).sort(), ['with-both', 'with-set']);
  });
});
