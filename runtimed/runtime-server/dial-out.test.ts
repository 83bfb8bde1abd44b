import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dialOut, peerGone, redialDelayMs } from './dial-out.ts';

describe('runtime-server dial-out: backoff and giving up', () => {
  it('redials after a doubling delay, capped', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 100].map((n) => redialDelayMs(n, 200, 2000)),
      [200, 400, 800, 1600, 2000, 2000, 2000],
    );
    assert.equal(redialDelayMs(0, 200, 2000), 200);
  });

  it('counts runtimed as gone only after dials failed for the whole give-up time', () => {
    assert.equal(peerGone(undefined, 1_000_000, 120_000), false);
    assert.equal(peerGone(1000, 1000 + 119_999, 120_000), false);
    assert.equal(peerGone(1000, 1000 + 120_000, 120_000), true);
  });

  describe('with real sockets', () => {
    let dir: string;
    let peer: Server | undefined;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'krt-dialout-'));
    });
    afterEach(() => {
      peer?.close();
      peer = undefined;
      rmSync(dir, { recursive: true, force: true });
    });

    it('does not redial at once when the peer accepts and closes (no busy loop)', async () => {
      const path = join(dir, 'rt.sock');
      let accepted = 0;
      peer = createServer((s) => {
        accepted++;
        s.destroy();
      });
      await new Promise<void>((r) => peer!.listen(path, r));
      const d = dialOut(path, createHttpServer(), { idle: 4, retryMs: 60_000, maxRetryMs: 60_000 });
      try {
        while (accepted < 4) await new Promise((r) => setTimeout(r, 10));
        // Every idle connection closed: the next dial waits for the backoff (a minute here). The old
        // code redialled a closed connection at once, accepting hundreds of connections meanwhile.
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(accepted, 4);
      } finally {
        d.close();
      }
    });

    it('while nothing listens, redials every retryMs without doubling, so it connects right after runtimed listens (issue 17)', async () => {
      const path = join(dir, 'later.sock');
      let rounds = 0; // now() is read at least once for each refused dial
      const d = dialOut(path, createHttpServer(), {
        idle: 1,
        retryMs: 10,
        maxRetryMs: 60_000,
        now: () => {
          rounds++;
          return Date.now();
        },
      });
      try {
        // 30 refused rounds: with a doubling delay the 30th would come after years, not 300 ms.
        while (rounds < 30) await new Promise((r) => setTimeout(r, 10));
        const accepted = new Promise<void>((resolve) => {
          peer = createServer(() => resolve());
        });
        await new Promise<void>((r) => peer!.listen(path, r));
        await accepted;
      } finally {
        d.close();
      }
    });

    it('stops dialling and reports runtimed gone when no dial connects for the give-up time', async () => {
      let gone = 0;
      const d = dialOut(join(dir, 'nobody.sock'), createHttpServer(), {
        retryMs: 5,
        maxRetryMs: 5,
        giveUpMs: 50,
        onGone: () => gone++,
      });
      while (gone === 0) await new Promise((r) => setTimeout(r, 10));
      assert.equal(d.idle(), 0);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(gone, 1);
    });
  });
});
