import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { ignoreLateError, readBody } from './client.ts';

/** A response body stream (readBody uses only the stream side of IncomingMessage). */
const response = (): PassThrough & IncomingMessage => new PassThrough() as PassThrough & IncomingMessage;

describe('lib/kube readBody', () => {
  it('leaves nothing on a response once its body was read (a pooled socket keeps its first response)', async () => {
    const res = response();
    const body = readBody(res);
    res.end('{"kind":"PodList","items":[]}');
    assert.equal(await body, '{"kind":"PodList","items":[]}');
    assert.equal(res.listenerCount('data'), 0);
    assert.equal(res.listenerCount('end'), 0);
    assert.deepEqual(res.listeners('error'), [ignoreLateError], 'no listener that holds the body or its promise');
    res.emit('error', new Error('late socket error'));
  });

  it('rejects on an error and detaches as well', async () => {
    const res = response();
    const body = readBody(res);
    res.write('partial');
    res.emit('error', new Error('reset'));
    await assert.rejects(body, /reset/);
    assert.equal(res.listenerCount('data'), 0);
    assert.deepEqual(res.listeners('error'), [ignoreLateError]);
  });
});
