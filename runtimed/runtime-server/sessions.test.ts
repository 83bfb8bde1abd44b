import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempDir } from '../../lib/fs/temp-dir.ts';
import WebSocket, { type ClientOptions } from 'ws';
import { Channel, exitCodeOf, frame, PROTOCOL } from '../../lib/session/channel.ts';
import { MAX_FRAME_BYTES } from '../../lib/session/frames.ts';
import { DialIn } from '../dial-in.ts';
import { startRuntimeServer, type RuntimeServer } from './server.ts';
import { OUTPUT_HIGH_WATER, parseSessionSpec, SESSION_HEADER, type SessionSpec } from './sessions.ts';

interface Result {
  stdout: string;
  stderr: string;
  code: number;
  status: { status?: string; reason?: string; message?: string };
}

/** A WebSocket to the Runtime Server over a connection it dialled in (as runtimed opens one). */
function connectSession(channel: DialIn, spec: SessionSpec): WebSocket {
  return new WebSocket('ws://runtime/v1/sessions', [PROTOCOL], {
    createConnection: channel.createConnection as unknown as ClientOptions['createConnection'],
    headers: { [SESSION_HEADER]: Buffer.from(JSON.stringify(spec)).toString('base64') },
  });
}

function operate(channel: DialIn, spec: SessionSpec, input: (ws: WebSocket) => void): Promise<Result> {
  return new Promise((resolve, reject) => {
    const ws = connectSession(channel, spec);
    const out = { stdout: '', stderr: '', code: -1, status: {} };
    ws.on('open', () => input(ws));
    ws.on('message', (m: Buffer) => {
      const ch = m[0];
      const data = m.subarray(1).toString('utf8');
      if (ch === Channel.Stdout) out.stdout += data;
      else if (ch === Channel.Stderr) out.stderr += data;
      else if (ch === Channel.Status) {
        out.status = JSON.parse(data) as Result['status'];
        out.code = exitCodeOf(out.status);
      }
    });
    ws.on('close', () => resolve(out));
    ws.on('error', reject);
  });
}

describe('runtime server: session operations', () => {
  let dir: string;
  let srv: RuntimeServer;
  let socket: DialIn;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'krt-sess-'));
    socket = new DialIn(join(dir, 'runtime.sock'));
    await socket.listen();
    srv = startRuntimeServer(socket.path, 'bash', {});
  });
  after(() => {
    srv.close();
    socket.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs an interactive shell: stdin in, stdout and stderr out, exit code in the status frame', async () => {
    const r = await operate(
      socket,
      {
        id: 'a',
        command: ['bash', '-c', 'read name; echo "$GREETING $name from $(pwd)"; echo oops >&2; exit 7'],
        workingDir: dir,
        env: { GREETING: 'hi' },
      },
      (ws) => {
        ws.send(frame(Channel.Stdin, 'wor'));
        ws.send(frame(Channel.Stdin, 'ld\n'));
      },
    );
    assert.equal(r.stdout, `hi world from ${dir}\n`);
    assert.equal(r.stderr, 'oops\n');
    assert.equal(r.code, 7);
    assert.equal(r.status.reason, 'NonZeroExitCode');
  });

  it('a `bash -c` operation does not run ~/.bashrc (its stdin is a socket; SHLVL from the spec cannot undo it)', async () => {
    const home = tempDir('krt-home-');
    writeFileSync(join(home, '.bashrc'), 'echo FROM_BASHRC\n');
    const r = await operate(
      socket,
      { id: 'rc', command: ['bash', '-c', 'echo ran'], workingDir: dir, env: { HOME: home, SHLVL: '0' } },
      () => undefined,
    );
    assert.equal(r.stdout, 'ran\n');
    assert.equal(r.code, 0);
  });

  it('the default command is the language shell reading commands from stdin', async () => {
    const r = await operate(socket, { id: 'd', command: [], workingDir: dir, env: {} }, (ws) => {
      ws.send(frame(Channel.Stdin, 'x=$((6*7)); echo $x\nexit 3\n'));
    });
    assert.equal(r.stdout, '42\n');
    assert.equal(r.code, 3);
  });

  it('closing stdin ends a reader (v5 close frame) and success is exit 0', async () => {
    const r = await operate(socket, { id: 'b', command: ['wc', '-l'], workingDir: dir, env: {} }, (ws) => {
      ws.send(frame(Channel.Stdin, 'a\nb\nc\n'));
      ws.send(frame(Channel.Resize, JSON.stringify({ Width: 80, Height: 24 })));
      ws.send(Buffer.from([Channel.Close, Channel.Stdin]));
    });
    assert.equal(r.stdout.trim(), '3');
    assert.equal(r.code, 0);
    assert.equal(r.status.status, 'Success');
  });

  it('a command that cannot start ends with a StartFailed status, not a crash', async () => {
    const r = await operate(
      socket,
      { id: 'c', command: ['/nonexistent/binary'], workingDir: dir, env: {} },
      () => undefined,
    );
    assert.equal(r.status.reason, 'StartFailed');
    assert.equal(r.code, 1);
  });

  it('with tty: a pseudo-terminal of the requested size, resized live, output merged, exit code kept', async () => {
    const r = await operate(
      socket,
      { id: 't', command: ['bash', '--norc', '--noprofile'], workingDir: dir, env: { PS1: '$ ' }, tty: true },
      (ws) => {
        // Like a person at a terminal, type only once the prompt is there (readline may drop typeahead).
        ws.send(frame(Channel.Resize, JSON.stringify({ Width: 100, Height: 30 })));
        let seen = '';
        let step = 0;
        const onMsg = (m: Buffer): void => {
          seen += m.subarray(1).toString();
          if (step === 0 && seen.includes('$ ')) {
            step = 1;
            ws.send(frame(Channel.Stdin, 'stty size; [ -t 0 ] && echo on-a-tty; echo to-stderr >&2\n'));
          } else if (step === 1 && /to-stderr\r?\n/.test(seen.split('echo to-stderr >&2')[1] ?? '')) {
            step = 2;
            ws.send(frame(Channel.Resize, JSON.stringify({ Width: 132, Height: 50 })));
            ws.send(frame(Channel.Stdin, 'stty size; exit 6\n'));
          }
        };
        ws.on('message', onMsg);
      },
    );
    assert.match(r.stdout, /^30 100\r?$/m);
    assert.match(r.stdout, /^on-a-tty\r?$/m);
    assert.match(r.stdout, /^to-stderr\r?$/m, 'stderr comes through the terminal');
    assert.match(r.stdout, /^50 132\r?$/m);
    assert.equal(r.stderr, '');
    assert.equal(r.code, 6);
  });

  it('with tty: closing stdin sends end-of-file to the program', async () => {
    const r = await operate(socket, { id: 'u', command: ['cat'], workingDir: dir, env: {}, tty: true }, (ws) => {
      ws.send(frame(Channel.Stdin, 'line\n'));
      setTimeout(() => ws.send(Buffer.from([Channel.Close, Channel.Stdin])), 200);
    });
    assert.match(r.stdout, /line/);
    assert.equal(r.code, 0);
  });

  it('a slow client gets every byte of a large output (the process is paused, not buffered without bound)', async () => {
    const total = 8 * OUTPUT_HIGH_WATER;
    let got = 0;
    const r = await operate(
      socket,
      { id: 'big', command: ['sh', '-c', `head -c ${total} /dev/zero`], workingDir: dir, env: {} },
      (ws) => {
        ws.pause();
        setTimeout(() => ws.resume(), 300);
        ws.on('message', (m: Buffer) => {
          if (m[0] === Channel.Stdout) got += m.length - 1;
        });
      },
    );
    assert.equal(got, total);
    assert.equal(r.code, 0);
  });

  it('rejects a malformed spec before upgrading', () => {
    assert.equal(parseSessionSpec(undefined), 'missing session spec');
    assert.equal(parseSessionSpec('!!'), 'session spec is not base64 JSON');
    assert.equal(
      parseSessionSpec(Buffer.from(JSON.stringify({ id: 'x', workingDir: '/', command: [1] })).toString('base64')),
      'session command must be a list of strings',
    );
  });

  it('closes an operation that sends a frame larger than MAX_FRAME_BYTES with 1009 (issue 11 item 8)', async () => {
    const ws = connectSession(socket, { id: 'big', command: ['bash', '-c', 'sleep 5'], workingDir: dir, env: {} });
    await new Promise((r) => ws.once('open', r));
    ws.send(frame(Channel.Stdin, Buffer.alloc(MAX_FRAME_BYTES)));
    const code = await new Promise<number>((r) => ws.once('close', (c: number) => r(c)));
    assert.equal(code, 1009);
  });
});
