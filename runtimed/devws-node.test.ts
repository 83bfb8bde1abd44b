import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { CLONE_MESSAGE_MAX } from '../lib/devws/node-report.ts';
import { cloneOnce, isBusy, readJournal, runNodeAgent, type NodeConfig } from './devws-node.ts';

describe('devws-node', () => {
  const homes: string[] = [];
  const newHome = (): string => {
    const home = mkdtempSync(join(tmpdir(), 'devws-node-'));
    homes.push(home);
    return home;
  };
  after(() => {
    for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
  });

  it('is busy while anything is under ~/.krt/activity', () => {
    const home = newHome();
    assert.equal(isBusy(home), false);
    mkdirSync(join(home, '.krt', 'activity', 'session-1'), { recursive: true });
    assert.equal(isBusy(home), true);
  });

  it('stops at once when aborted (SIGTERM), without waiting out the poll interval', async () => {
    const stop = new AbortController();
    let ticks = 0;
    const agent = {
      tick: (): Promise<'none'> => {
        ticks++;
        // SIGTERM arrives during the first round; the next wait is an hour long.
        stop.abort();
        return Promise.resolve('none');
      },
    };
    const cfg: NodeConfig = {
      namespace: 'ns',
      workspace: 'w',
      self: { nodeId: 'n', incarnation: 'i', sandboxId: 's', generation: 1 },
      home: '/nonexistent',
      pollMs: 3_600_000,
    };
    // Without the abortable wait this never resolves (the test times out).
    await runNodeAgent(agent, cfg, pino({ level: 'silent' }), stop.signal);
    assert.equal(ticks, 1);
  });

  it("reports why a clone failed (one bounded line of git's error), journaled with the result", async () => {
    const home = newHome();
    const self = { nodeId: 'n', incarnation: 'i', sandboxId: 's', generation: 1 };
    const cfg: NodeConfig = { namespace: 'ns', workspace: 'w', self, home, pollMs: 1000 };
    const input = {
      // Nothing listens on port 1: git cannot connect.
      repositoryUrl: 'https://127.0.0.1:1/ns/p1.git',
      snapshotRef: 'refs/ora/upstreams/u/snapshots/c',
      baseCommit: 'c'.repeat(40),
      workspaceBranch: 'refs/heads/workspaces/w/main',
    };
    const base = { ...self, heartbeatAt: new Date(0).toISOString() };
    const act = { kind: 'clone' as const, operation: 'op1', attempt: 0, input, localBranch: 'main', base };
    const r = await cloneOnce(cfg, act, pino({ level: 'silent' }));
    assert.equal(r.result, 'failed');
    assert.match(r.message ?? '', /^git fetch: .*127\.0\.0\.1/);
    assert.ok((r.message ?? '').length <= CLONE_MESSAGE_MAX && !/\n/.test(r.message ?? ''));
    assert.deepEqual(readJournal(cfg, 'op1', 0), { state: 'done', clone: r });
  });
});
