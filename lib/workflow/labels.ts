/** Labels the Workflow controller puts on its child Runs and job workspaces. */
/** The Workflow a WorkflowRun was triggered from (the WorkflowRun's own name when it was written inline);
 * with JOB_NAME_LABEL it is what the seed's Run affinity example selects. */
export const WORKFLOW_LABEL = 'workflows.kruntimes.io/workflow';
/** The job of a child Run or job workspace (same value as JOB_LABEL, under the seed's name). */
export const JOB_NAME_LABEL = 'workflows.kruntimes.io/job';
export const WORKFLOWRUN_LABEL = 'workflows.kruntimes.io/workflowrun';
export const WORKFLOWRUN_UID_LABEL = 'kruntimes.io/workflowrun-uid';
export const JOB_LABEL = 'kruntimes.io/workflow-job';
export const CONTROLLER_LABEL = 'workflows.kruntimes.io/controller';
/** The identity the Workflow controller's operations are made as: its own ServiceAccount, which
 * the relay impersonates (docs/functions.md "Identity"). */
export const CONTROLLER_SERVICE_ACCOUNT = 'system:serviceaccount:kruntimes-system:kruntimes-fn-workflowrun-controller';
