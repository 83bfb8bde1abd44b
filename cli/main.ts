/** krt: the kruntimes command line. */
import { Command } from 'commander';
import { registerLocal } from './local/commands.ts';
import { VERSION } from '../lib/version.ts';

const program = new Command('krt').description('kruntimes: short work on pre-warmed Runtime Pods').showHelpAfterError();
program.command('version').description('print the krt version').action(() => { process.stdout.write(`krt ${VERSION}\n`); });
registerLocal(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
