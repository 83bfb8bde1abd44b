import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { PROTOCOL } from './channel.ts';
import { MAX_FRAME_BYTES, sessionWebSocketServer } from './frames.ts';

describe('session WebSocket frame bound (issue 11 item 8)', () => {
  let srv: Server;
  let url: string;
  before(async () => {
    const wss = sessionWebSocketServer();
    srv = createServer();
    srv.on('upgrade', (req, socket, head) => {
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('error', () => undefined);
        ws.on('message', (m: Buffer) => ws.send(String(m.length)));
      });
    });
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    url = `ws://127.0.0.1:${(srv.address() as AddressInfo).port}/`;
  });
  after(() => srv.close());

  async function send(size: number): Promise<{ reply?: string; code?: number }> {
    const ws = new WebSocket(url, [PROTOCOL]);
    await once(ws, 'open');
    ws.send(Buffer.alloc(size));
    return new Promise((resolve) => {
      ws.once('message', (m: Buffer) => {
        resolve({ reply: m.toString() });
        ws.close();
      });
      ws.once('close', (code: number) => resolve({ code }));
    });
  }

  it('accepts a message of MAX_FRAME_BYTES', async () => {
    assert.deepEqual(await send(MAX_FRAME_BYTES), { reply: String(MAX_FRAME_BYTES) });
  });

  it('closes the connection with 1009 on a larger message instead of buffering it', async () => {
    assert.deepEqual(await send(MAX_FRAME_BYTES + 1), { code: 1009 });
  });
});
