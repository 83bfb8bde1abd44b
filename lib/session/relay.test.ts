import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import { relay } from './relay.ts';

/** Just enough of a WebSocket for the relay: messages in, sends whose completion the test controls. */
class FakeSocket extends EventEmitter {
  // ws has its readyState constants on every instance too; the relay reads them there.
  readonly CONNECTING = WebSocket.CONNECTING;
  readonly OPEN = WebSocket.OPEN;
  readyState: number = WebSocket.OPEN;
  paused = false;
  readonly sent: Buffer[] = [];
  readonly pending: (() => void)[] = [];
  send(m: Buffer, _o: unknown, cb: () => void): void {
    this.sent.push(m);
    this.pending.push(cb);
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  close(code: number): void {
    this.readyState = WebSocket.CLOSED;
    this.emit('closed', code);
  }
  terminate(): void {
    this.readyState = WebSocket.CLOSED;
  }
  flush(): void {
    for (const cb of this.pending.splice(0)) cb();
  }
}

describe('session relay', () => {
  it('stops reading a side while the other side has more than the high-water mark queued, and resumes once it drains', () => {
    const a = new FakeSocket();
    const b = new FakeSocket();
    relay(a as unknown as WebSocket, b as unknown as WebSocket, 1000);
    for (let i = 0; i < 5; i++) a.emit('message', Buffer.alloc(300), true);
    assert.equal(b.sent.length, 5, 'every message is forwarded in order');
    assert.equal(a.paused, true, 'reading from a stops with 1500 bytes queued towards b');
    assert.equal(b.paused, false, 'the other direction is unaffected');
    b.pending.splice(0, 2).forEach((cb) => cb());
    assert.equal(a.paused, true, '900 bytes still queued: above half the mark');
    b.flush();
    assert.equal(a.paused, false, 'resumed once b took the data');
  });

  it('closes the other side with the same code, mapping reserved codes to a normal close', () => {
    const a = new FakeSocket();
    const b = new FakeSocket();
    const codes: number[] = [];
    b.on('closed', (c: number) => codes.push(c));
    relay(a as unknown as WebSocket, b as unknown as WebSocket);
    a.emit('close', 1006);
    assert.deepEqual(codes, [1000]);
  });
});
