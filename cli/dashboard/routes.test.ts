/** The dashboard API's error mapping and trigger input checks (pure). */
import assert from 'node:assert/strict';
import { ApiError } from '../../lib/kube/errors.ts';
import { CallError } from '../../lib/workflow/calls.ts';
import { renderRun } from '../wf/commands.ts';
import { PathRefused } from './paths.ts';
import { problem, triggerInputs, workspaceOperation } from './routes.ts';

describe('dashboard API errors and trigger inputs', () => {
  it("a Workflow input refused while binding is 400 InvalidInput with the binder's message, not a 502", () => {
    const wf = {
      metadata: { name: 'greet' },
      spec: { inputs: { who: { required: true } }, jobs: { a: { 'runs-on': 'bash', steps: [{ run: 'echo hi' }] } } },
    } as unknown as Parameters<typeof renderRun>[0];
    let err: unknown;
    try {
      renderRun(wf, {});
    } catch (e) {
      err = e;
    }
    assert.deepEqual(problem(err), { code: 400, reason: 'InvalidInput', message: 'missing required input "who"' });
    assert.equal(problem(new CallError('input', 'unknown input "x"')).code, 400);
  });

  it("keeps a refused path 400 NotAllowed and the API server's own code and reason", () => {
    assert.equal(problem(new PathRefused('no')).reason, 'NotAllowed');
    const forbidden = problem(new ApiError(403, { reason: 'Forbidden', message: 'nope', code: 403 }, 'forbidden'));
    assert.deepEqual([forbidden.code, forbidden.reason], [403, 'Forbidden']);
  });

  it('accepts an object of strings as inputs and refuses anything else', () => {
    assert.deepEqual(triggerInputs({}), {});
    assert.deepEqual(triggerInputs(undefined), {});
    assert.deepEqual(triggerInputs({ inputs: { who: 'world' } }), { who: 'world' });
    for (const bad of [{ inputs: 'x' }, { inputs: ['a'] }, { inputs: { n: 1 } }, { inputs: null }])
      assert.throws(
        () => triggerInputs(bad),
        (e: unknown) => problem(e).reason === 'InvalidInput',
      );
  });

  it("a developer Workspace's start/stop is an Operation of that kind for its Project; other actions are refused", () => {
    const ws = { metadata: { name: 'p1-main' }, spec: { project: 'p1' } };
    assert.deepEqual(workspaceOperation(ws, 'stop'), {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Operation',
      metadata: { generateName: 'p1-main-stop-' },
      spec: { kind: 'stop', project: 'p1', workspace: 'p1-main' },
    });
    assert.equal((workspaceOperation(ws, 'start').spec as { kind: string }).kind, 'start');
    for (const a of ['delete_workspace', 'restart', undefined])
      assert.throws(() => workspaceOperation(ws, a), PathRefused);
  });
});
