import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import WebSocket from 'ws';
import type { KubeClient } from '../lib/kube/client.ts';
import { Channel, frame, PROTOCOL } from '../lib/session/channel.ts';
import { DialIn } from './dial-in.ts';
import { callerToken, startGateway, TOKEN_PROTOCOL_PREFIX, type Access, type Gateway, type Review } from './gateway.ts';
import { startRuntimeServer, type RuntimeServer } from './runtime-server/server.ts';
import type { Run } from './types.ts';

/** Opens a session operation through the gateway; resolves with stdout or the refusal's HTTP code. */
function operate(
  gw: Gateway,
  path: string,
  protocols: string[],
  headers: Record<string, string>,
  input: string,
): Promise<{ code: number; stdout: string }> {
  const url = new URL(gw.endpoint({ metadata: { namespace: 'ns', name: 'x', uid: 'x' } } as Run).url);
  return new Promise<{ code: number; stdout: string }>((resolve) => {
    const ws = new WebSocket(`wss://${url.host}${path}`, protocols, { headers, rejectUnauthorized: false });
    let stdout = '';
    ws.on('unexpected-response', (_req, res) => resolve({ code: res.statusCode ?? 0, stdout }));
    ws.on('open', () => {
      ws.send(frame(Channel.Stdin, input));
      ws.send(Buffer.from([Channel.Close, Channel.Stdin]));
    });
    ws.on('message', (m: Buffer) => {
      if (m[0] === Channel.Stdout) stdout += m.subarray(1).toString('utf8');
    });
    ws.on('close', () => resolve({ code: 101, stdout }));
    ws.on('error', () => undefined);
  });
}

describe('runtimed Runtime Gateway: session operations for SDK and browser clients (issue 15)', () => {
  let dir: string;
  let dial: DialIn;
  let rs: RuntimeServer;
  let gw: Gateway;
  const asked: string[] = [];
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'krt-gwsess-'));
    dial = new DialIn(join(dir, 'rt.sock'));
    await dial.listen();
    rs = startRuntimeServer(dial.path, 'bash', { PATH: process.env.PATH });
    gw = await startGateway({
      address: '127.0.0.1',
      port: 0,
      namespace: 'ns',
      client: {} as KubeClient,
      log: pino({ level: 'silent' }),
      target: () => ({ code: 503, message: 'no functions here' }),
      review: (token: string, _r, access: Access): Promise<Review> => {
        asked.push(`${token}:${access}`);
        return Promise.resolve(token === 'operator' ? 'allowed' : token === 'viewer' ? 'denied' : 'unauthenticated');
      },
      sessions: {
        channel: dial,
        target: (name, uid) =>
          name === 'shell' && uid === 'u1'
            ? { spec: { id: 'u1', command: [], workingDir: dir, env: {} }, attach: () => undefined }
            : { code: 404, message: 'no such session Run' },
      },
    });
  });
  after(() => {
    gw.close();
    rs.close();
    dial.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const path = '/v1/namespaces/ns/runs/shell/u1/session';

  it('takes the token from Authorization or, for browsers, from the token subprotocol', () => {
    assert.equal(callerToken({ authorization: 'Bearer abc' }), 'abc');
    const b64 = Buffer.from('tok').toString('base64url');
    assert.equal(callerToken({ 'sec-websocket-protocol': `${PROTOCOL}, ${TOKEN_PROTOCOL_PREFIX}${b64}` }), 'tok');
    assert.equal(callerToken({}), undefined);
  });

  it('runs an operation for a caller allowed to create runs/session (header or subprotocol token)', async () => {
    const a = await operate(gw, path, [PROTOCOL], { Authorization: 'Bearer operator' }, 'echo $((6*7))\n');
    assert.deepEqual(a, { code: 101, stdout: '42\n' });
    const b64 = Buffer.from('operator').toString('base64url');
    const b = await operate(gw, path, [PROTOCOL, `${TOKEN_PROTOCOL_PREFIX}${b64}`], {}, 'echo browser\n');
    assert.deepEqual(b, { code: 101, stdout: 'browser\n' });
    assert.ok(asked.includes('operator:session'));
  });

  it('refuses without a token (401), a caller without create on runs/session (403), another name or UID (404)', async () => {
    assert.equal((await operate(gw, path, [PROTOCOL], {}, '')).code, 401);
    assert.equal((await operate(gw, path, [PROTOCOL], { Authorization: 'Bearer viewer' }, '')).code, 403);
    const other = '/v1/namespaces/ns/runs/shell/u2/session';
    assert.equal((await operate(gw, other, [PROTOCOL], { Authorization: 'Bearer operator' }, '')).code, 404);
    const ns = '/v1/namespaces/elsewhere/runs/shell/u1/session';
    assert.equal((await operate(gw, ns, [PROTOCOL], { Authorization: 'Bearer operator' }, '')).code, 404);
  });
});
