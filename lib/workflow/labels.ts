/** Labels the Workflow controller puts on its child Runs and job workspaces. */
export const WORKFLOW_LABEL = 'workflows.kruntimes.io/workflow';
export const WORKFLOWRUN_LABEL = 'workflows.kruntimes.io/workflowrun';
export const WORKFLOWRUN_UID_LABEL = 'kruntimes.io/workflowrun-uid';
export const JOB_LABEL = 'kruntimes.io/workflow-job';
export const CONTROLLER_LABEL = 'workflows.kruntimes.io/controller';
/** The identity of the host that runs the Workflow controller (the extension API server). */
export const CONTROLLER_SERVICE_ACCOUNT = 'system:serviceaccount:kruntimes-system:kruntimes-extension';
