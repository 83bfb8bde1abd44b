/**
 * The contract of Node's IPC channel that the python function worker relies on (ADR 0024),
 * pinned against the Node in use. Node documents this wire format only for Node children; if a
 * Node upgrade changes any of it, this test names the assumption that broke (then change
 * function-worker.py's Ipc class, or move the hand-off to a plain Unix socket).
 * The child here is a minimal python reader, not the worker, so a failure is about Node.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Reports, as one JSON line on stdout, what arrived on the IPC fd: raw lines, fds, and whether
 * anything arrived while a handle was not yet acknowledged. */
const READER = `
import json, os, select, socket, sys
s = socket.socket(fileno=int(os.environ["NODE_CHANNEL_FD"]))
report = {"mode": os.environ.get("NODE_CHANNEL_SERIALIZATION_MODE"), "lines": []}
buf = b""
while not any('"go"' in l["line"] for l in report["lines"]):
    data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(16))
    if not data:
        break
    fds = [int.from_bytes(raw[i:i+4], sys.byteorder) for lvl, kind, raw in anc
           if lvl == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS for i in range(0, len(raw) - 3, 4)]
    for f in fds:
        os.write(f, b"through the passed fd\\n")
        os.close(f)
    buf += data
    while b"\\n" in buf:
        line, buf = buf.split(b"\\n", 1)
        report["lines"].append({"line": line.decode(), "fds": len(fds)})
        if b"NODE_HANDLE" in line:
            # Nothing more may arrive before the handle is acknowledged.
            r, _, _ = select.select([s], [], [], 0.5)
            report["beforeAck"] = bool(buf) or bool(r)
            s.sendall(json.dumps({"cmd": "NODE_HANDLE_ACK"}).encode() + b"\\n")
s.sendall(json.dumps({"from": "python"}).encode() + b"\\n")
print(json.dumps(report), flush=True)
`;

interface Report {
  mode: string | null;
  /** Each line received, with the number of fds that came with its recvmsg. */
  lines: { line: string; fds: number }[];
  beforeAck?: boolean;
}

describe('runtimed/runtime-server Node IPC wire format used by the python worker (ADR 0024)', () => {
  it('JSON lines, NODE_HANDLE with one SCM_RIGHTS fd, nothing sent until NODE_HANDLE_ACK, JSON lines back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'krt-ipc-'));
    const path = join(dir, 's.sock');
    const got: string[] = [];
    const srv = createServer((c) => c.on('data', (d: Buffer) => got.push(d.toString())));
    await new Promise<void>((r) => srv.listen(path, r));
    const sock: Socket = connect(path);
    await new Promise((r) => sock.once('connect', r));
    const child = spawn('python3', ['-c', READER], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    const fromChild: unknown[] = [];
    child.on('message', (m) => fromChild.push(m));
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.send({ lease: '123' });
    child.send({ calls: 1, head: '' }, sock);
    child.send({ go: 1 });
    await new Promise((r) => child.once('exit', r));
    await new Promise((r) => setTimeout(r, 100));
    srv.close();
    rmSync(dir, { recursive: true, force: true });

    const report = JSON.parse(out) as Report;
    assert.equal(report.mode, 'json', 'NODE_CHANNEL_SERIALIZATION_MODE');
    const [lease, handle, go] = report.lines;
    assert.equal(lease?.line, '{"lease":"123"}', 'a message is one JSON line');
    const h = JSON.parse(handle?.line ?? '{}') as { cmd?: string; type?: string; msg?: unknown };
    assert.deepEqual([h.cmd, h.type, h.msg], ['NODE_HANDLE', 'net.Socket', { calls: 1, head: '' }]);
    assert.equal(handle?.fds, 1, 'the socket comes as one SCM_RIGHTS fd with the NODE_HANDLE line');
    assert.equal(report.beforeAck, false, 'Node holds later messages until NODE_HANDLE_ACK');
    assert.deepEqual(go, { line: '{"go":1}', fds: 0 });
    assert.equal(report.lines.length, 3);
    assert.deepEqual(fromChild, [{ from: 'python' }], 'JSON lines from the child are messages');
    assert.deepEqual(got, ['through the passed fd\n'], 'the fd is the socket itself');
    sock.destroy();
  });
});
