import assert from 'node:assert/strict';
import { Command } from 'commander';
import { localUpOptions, registerLocal } from './commands.ts';

describe('krt local up: options', () => {
  const parsed = (args: string[]): { node?: string; install?: boolean } => {
    const program = new Command();
    registerLocal(program);
    const up = program.commands.find((c) => c.name() === 'local')!.commands.find((c) => c.name() === 'up')!;
    up.parseOptions(args);
    return up.opts();
  };

  it('installs kruntimes unless --no-install (a bare cluster of the node kind)', () => {
    assert.equal(localUpOptions(parsed([])).install, undefined);
    assert.equal(localUpOptions(parsed(['--no-install'])).install, false);
    assert.deepEqual(
      { ...localUpOptions(parsed(['--node', 'kubelet', '--no-install'])), progress: undefined },
      { root: localUpOptions({}).root, progress: undefined, nodeKind: 'kubelet', install: false },
    );
  });
});
