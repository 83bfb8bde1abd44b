import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { gracefulShutdown, shutdownBoundMs } from './shutdown.ts';

describe('runtimed graceful shutdown', () => {
  it('waits for the stop to finish', async () => {
    const proc = new EventEmitter();
    let stopped = false;
    const done = gracefulShutdown(
      proc,
      () => {
        stopped = true;
        return Promise.resolve();
      },
      60_000,
    );
    proc.emit('SIGTERM');
    assert.equal(await done, 'stopped');
    assert.ok(stopped);
  });

  it('ends at the bound when the stop hangs (an API server that never answers)', async () => {
    const proc = new EventEmitter();
    const done = gracefulShutdown(proc, () => new Promise<void>(() => undefined), 20);
    proc.emit('SIGTERM');
    assert.equal(await done, 'bound');
  });

  it('ends at once on a second SIGTERM, and a failed stop still ends it', async () => {
    const proc = new EventEmitter();
    const hung = gracefulShutdown(proc, () => new Promise<void>(() => undefined), 60_000);
    proc.emit('SIGTERM');
    proc.emit('SIGTERM');
    assert.equal(await hung, 'signal');
    const failing = new EventEmitter();
    const done = gracefulShutdown(failing, () => Promise.reject(new Error('drain failed')), 60_000);
    failing.emit('SIGTERM');
    assert.equal(await done, 'stopped');
  });

  it('bounds the stop just above the drain bound', () => {
    assert.equal(shutdownBoundMs(25_000), 28_000);
  });
});
