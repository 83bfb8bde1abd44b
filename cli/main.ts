/** krt: the kruntimes command line. */
import { Command } from 'commander';
import { registerLocal } from './local/commands.ts';
import { registerRuns } from './runs/commands.ts';
import { registerWorkflows } from './wf/commands.ts';
import { registerDashboard } from './dashboard/commands.ts';
import { OperationFailed, registerDevws } from './devws/commands.ts';
import { UsageError } from './kube.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { VERSION } from '../lib/version.ts';

const program = new Command('krt')
  .description('kruntimes: short work on pre-warmed Runtime Pods')
  .showHelpAfterError()
  .option('--kubeconfig <path>', 'kubeconfig (default: $KUBECONFIG, then ~/.kube/config)')
  .option('-n, --namespace <ns>', "namespace (default: the context's, then default)")
  .option('-o, --output <format>', 'json | yaml | name (default: a table)');
program
  .command('version')
  .description('print the krt version')
  .action(() => {
    process.stdout.write(`krt ${VERSION}\n`);
  });
registerLocal(program);
registerRuns(program);
registerWorkflows(program);
registerDashboard(program);
registerDevws(program);

/** Exit codes: 0 ok, 1 error (the API server's Status message is shown), 2 usage, 3 a waited-for Run or Operation did not succeed. */
program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof OperationFailed) {
    process.stderr.write(`error: ${err.message}\n`);
    process.exit(3);
  }
  const msg = isApiError(err)
    ? `${err.message} (${err.reason}, HTTP ${err.code})`
    : err instanceof Error
      ? err.message
      : String(err);
  process.stderr.write(`error: ${msg}\n`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
