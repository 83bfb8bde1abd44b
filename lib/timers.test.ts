import assert from 'node:assert/strict';
import { TimerSet } from './timers.ts';

const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('TimerSet', () => {
  it('forgets a timer once it fired: a loop rescheduling itself holds one entry', async () => {
    const timers = new TimerSet();
    let runs = 0;
    const loop = (): void => {
      if (++runs < 20) timers.after(0, loop);
    };
    timers.after(0, loop);
    while (runs < 20) await tick(1);
    assert.equal(timers.size, 0);
  });

  it('clear cancels what has not fired', async () => {
    const timers = new TimerSet();
    let fired = 0;
    timers.after(5, () => fired++);
    timers.after(5, () => fired++);
    assert.equal(timers.size, 2);
    timers.clear();
    await tick(20);
    assert.equal(fired, 0);
    assert.equal(timers.size, 0);
  });
});
