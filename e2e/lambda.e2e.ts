/**
 * The `lambda` transport on the real local cluster (issue 13): the relay invokes every watch
 * function as an AWS Lambda Invoke of the real Runtime Interface Emulator (scripts/build-lambda-rie.sh)
 * in front of aws-lambda-ric running cmd/lambda.handler, the entrypoint of the Lambda image (lambda/Dockerfile),
 * as host processes. A Run, a WorkflowRun and a JobClass Job (the Kubernetes adapter) complete
 * with their functions invoked that way, and the operations are applied as each function's own
 * ServiceAccount: the SubjectAccessReviews show the relay's identity may not write what the
 * functions wrote, while the function's identity may and the relay may impersonate exactly it.
 *
 * The transport is switched by configuration only (the extension Deployment's env) and back after.
 */
import { PatchType } from '../lib/kube/client.ts';
import { admin, deleteNamespace, newNamespace } from './helpers.ts';
import { cleanup, uniq, X } from './jobclass-fixtures.ts';
import { startLambdaRie, type LambdaRie } from './lambda-rie.ts';
import { example, GROUP, runtimePods } from './runs-helpers.ts';
import {
  assertAppliedAsFunctions,
  DEPLOYMENTS,
  rolledOut,
  runWorkflowAndJob,
  type Deploy,
} from './transport-helpers.ts';

const EXTENSION = `${DEPLOYMENTS}/kruntimes-extension`;
const KEYS = ['KRT_FUNCTION_TRANSPORT', 'KRT_LAMBDA_ENDPOINT', 'KRT_LAMBDA_FUNCTION_NAME'];

/** The extension Deployment with these env vars set (a value) or removed (undefined), rolled out. */
async function setRelayEnv(vars: Record<string, string | undefined>): Promise<void> {
  const env = Object.entries(vars).map(([name, value]) =>
    value === undefined ? { name, $patch: 'delete' } : { name, value },
  );
  await admin().patch(
    EXTENSION,
    { spec: { template: { spec: { containers: [{ name: 'server', env }] } } } },
    PatchType.strategic,
  );
  await rolledOut('kruntimes-extension', 1);
}

describe('serverless functions: the lambda transport (Runtime Interface Emulator + aws-lambda-ric)', function () {
  let ns: string;
  let rie: LambdaRie | undefined;
  let saved: Record<string, string | undefined> = {};
  const cls = `e2e-lambda-${uniq}`;

  before(async () => {
    // Two execution environments: the Run's, the WorkflowRun's and the Job's functions share them.
    // The functions' settings (e.g. the fixture function directory) go where the handlers run.
    const current = (await admin().get<Deploy>(EXTENSION)).spec.template.spec.containers[0]?.env ?? [];
    const settings = current.filter(
      (e) => e.name.startsWith('KRT_') && e.value !== undefined && !KEYS.includes(e.name),
    ) as { name: string; value: string }[];
    rie = await startLambdaRie(2, Object.fromEntries(settings.map((e) => [e.name, e.value])));
    saved = Object.fromEntries(KEYS.map((k) => [k, current.find((e) => e.name === k)?.value]));
    await setRelayEnv({ KRT_FUNCTION_TRANSPORT: 'lambda', ...rie.env });
    ns = await newNamespace('lambda');
    await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, example('examples/runtimes/bash.yaml'));
    await runtimePods(ns, 'bash', 1);
  });
  after(async () => {
    if (ns) await deleteNamespace(ns);
    await cleanup([`${X}/jobclasses/${cls}`, `${X}/kubernetesexecutionparameters/${cls}-params`]);
    if (Object.keys(saved).length) await setRelayEnv(saved);
    rie?.stop();
  });

  it('a Run, a WorkflowRun and a JobClass Job complete with their functions invoked as Lambda invocations, applied as each function', async () => {
    await runWorkflowAndJob(ns, 'l', cls, 'lambda');
    await assertAppliedAsFunctions(ns);
  });
});
