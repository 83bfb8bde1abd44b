import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IncomingMessage } from 'node:http';
import { tempDir } from '../lib/fs/temp-dir.ts';
import type { OutputRecord } from './runtime-server/executions.ts';
import { runtimePair, type RuntimePair } from './runtime-fixtures.ts';

/** Each request the Runtime Server got, as "METHOD path". */
function requestsOf(pair: RuntimePair): string[] {
  const seen: string[] = [];
  pair.srv.server.prependListener('request', (req: IncomingMessage) => seen.push(`${req.method} ${req.url}`));
  return seen;
}

describe('runtimed RuntimeClient: one request per Run to the Runtime Server', () => {
  let dir: string;
  let pair: RuntimePair;
  beforeEach(async () => {
    dir = tempDir('krt-rtclient-');
    pair = await runtimePair(dir, 'bash', { PATH: process.env.PATH });
  });
  afterEach(() => pair.close());

  const script = (id: string, text: string): { id: string; workingDir: string; entrypoint: string } => {
    writeFileSync(join(dir, `${id}.sh`), text);
    return { id, workingDir: dir, entrypoint: join(dir, `${id}.sh`) };
  };
  const ids = (): string[] => pair.srv.executions.list().map((s) => s.id);

  it('starts and follows an execution in the same request: its records, then its end', async () => {
    const seen = requestsOf(pair);
    const following = await pair.client.executeFollowing(script('a', 'echo one; echo two >&2; echo three'));
    const records: OutputRecord[] = [];
    const end = await following((r) => records.push(r));
    assert.equal(end.state, 'SUCCEEDED');
    assert.deepEqual(records.map((r) => `${r.stream} ${r.line}`).sort(), ['stderr two', 'stdout one', 'stdout three']);
    assert.deepEqual(seen, ['POST /v1/executions?follow=1']);
  });

  it('answers once a silent execution started, before its end: it can be cancelled while followed', async () => {
    const following = await pair.client.executeFollowing(script('s', 'sleep 30'));
    await pair.client.cancel('s');
    const end = await following(() => undefined);
    assert.equal(end.state, 'FAILED');
    assert.equal(end.errorMessage, 'cancelled');
  });

  it('is refused while the execution lease has lapsed, as execute is', async () => {
    await pair.client.renewLease(0);
    await assert.rejects(pair.client.executeFollowing(script('f', 'true')), /fenced/);
    assert.deepEqual(ids(), []);
  });

  it('waits to launch while the lease has less than the minimum left, and goes on once a renewal gives room', async () => {
    await pair.client.renewLease(50); // a renewal resting on a heartbeat stamped before a stall
    let held = false;
    const waiting = pair.client.leaseHeld(5_000, 5).then(() => (held = true));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(held, false, 'not held: 50 ms is less than the minimum');
    await pair.client.renewLease(20_000);
    await waiting;
    assert.equal(held, true);
  });

  it('forgets a finished execution with the next execute, without a request of its own', async () => {
    assert.equal((await (await pair.client.executeFollowing(script('a', 'true')))(() => undefined)).state, 'SUCCEEDED');
    const seen = requestsOf(pair);
    pair.client.forgetLater('a');
    const following = await pair.client.executeFollowing(script('b', 'true'));
    assert.deepEqual(ids(), ['b'], 'a forgotten before b started');
    await following(() => undefined);
    assert.deepEqual(seen, ['POST /v1/executions?follow=1']);
  });

  it('forgets on its own when no execute request comes', async () => {
    await (
      await pair.client.executeFollowing(script('a', 'true'))
    )(() => undefined);
    const seen = requestsOf(pair);
    pair.client.forgetLater('a');
    while (ids().length) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(seen, ['DELETE /v1/executions/a']);
  });

  it('follows separately a Runtime Server that answers execute with a summary (an older one), and forgets on its own', async () => {
    // What an older Runtime Server sees: no follow in the execute request, no list of executions to forget.
    pair.srv.server.prependListener('request', (req: IncomingMessage) => {
      req.url = req.url?.replace('?follow=1', '');
    });
    const records: string[] = [];
    const end = await (await pair.client.executeFollowing(script('a', 'echo old')))((r) => records.push(r.line));
    assert.equal(end.state, 'SUCCEEDED');
    assert.deepEqual(records, ['old']);
    pair.client.forgetLater('a');
    const seen = requestsOf(pair);
    await (
      await pair.client.executeFollowing(script('b', 'true'))
    )(() => undefined);
    assert.deepEqual(seen.slice(0, 2), [
      'POST /v1/executions?follow=1',
      'GET /v1/executions/b/records?from=0&follow=1',
    ]);
    while (ids().includes('a')) await new Promise((r) => setTimeout(r, 20));
    assert.ok(seen.includes('DELETE /v1/executions/a'));
  });
});
