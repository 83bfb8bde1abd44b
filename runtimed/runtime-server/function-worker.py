"""Warm Python function worker of the Runtime Server (python-worker.ts).

argv[1] is the handler `pkg.module.function`, resolved relative to the working directory. The
module is imported once, at registration (one line on stdout: {"ready": true} or {"ready": false,
"error": "..."}). Then every call is one line in (the payload, compact JSON text) and one line
out (an InvokeResult: {"ok": true, "output": <json>} or {"ok": false, "reason": ..., "error":
...}), on either of two paths:
  - stdin/stdout, through the Runtime Server (the Runtime Server's HTTP invoke route, and every
    call when the hand-off is off);
  - a call channel handed over by the Runtime Server (issue 15): the connection runtimed upgraded
    for this function arrives over the Node IPC channel (fd NODE_CHANNEL_FD, Node's JSON-lines
    wire format; the socket comes as SCM_RIGHTS with its NODE_HANDLE line) and the worker then
    answers runtimed on it directly, with no Runtime Server process on the call path.
The IPC channel also carries the execution lease: {"lease": "<CLOCK_MONOTONIC ns>"} after every
renewal. A call after that deadline is refused (fenced), as the Runtime Server refuses it.
The function's own prints go to stderr so they never corrupt either protocol.
"""
import importlib
import json
import os
import select
import socket
import sys
import time

IO_LIMIT = 1 << 20
LINE_LIMIT = 2 * IO_LIMIT + 4096
SERVED_BY = b"python-worker"
# Made once: json.dumps with an option builds a new encoder on every call. Compact, as runtimed
# re-serialises the output anyway.
ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
DECODE = json.loads
MONOTONIC_NS = time.monotonic_ns


def resolve(handler):
    module_name, _, attr = handler.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"handler {handler!r} must be pkg.module.function")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"handler {handler!r}: {attr!r} is not a callable of module {module_name!r}")
    return fn


def failure(reason, error):
    return json.dumps({"ok": False, "reason": reason, "error": error[:IO_LIMIT]})


def call(fn, line, deadline):
    """One call: the payload line in, the InvokeResult line out (the same on both paths)."""
    if deadline is not None and MONOTONIC_NS() >= deadline:
        return failure("NotRegistered", "fenced: the execution lease lapsed")
    try:
        payload = DECODE(line) if line and not line.isspace() else None
    except ValueError:
        return failure("FunctionError", "the payload is not JSON")
    try:
        output = ENCODE(fn(payload))
    except BaseException as e:  # noqa: BLE001 - any error goes back to the caller
        return failure("FunctionError", f"{type(e).__name__}: {e}")
    if len(output) > IO_LIMIT:
        return failure("OutputTooLarge", f"output exceeds {IO_LIMIT} bytes")
    return '{"ok":true,"output":' + output + "}"


class Lines:
    """Splits a byte stream into lines; None from feed when a line grows past LINE_LIMIT."""

    def __init__(self):
        self.buf = b""

    def feed(self, data):
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        if len(self.buf) > LINE_LIMIT:
            return None
        return lines


class Ipc:
    """The Node IPC channel from the Runtime Server: JSON lines, a passed socket as SCM_RIGHTS."""

    def __init__(self, fd):
        os.set_inheritable(fd, False)
        self.sock = socket.socket(fileno=fd)
        self.sock.setblocking(True)
        self.lines = Lines()
        self.fds = []

    def send(self, msg):
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def read(self):
        """The messages now readable, each as (message, fd or None); None when the channel closed."""
        flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
        data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16), flags)
        if not data:
            return None
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                self.fds += [int.from_bytes(raw[i : i + 4], sys.byteorder) for i in range(0, len(raw) - 3, 4)]
        out = []
        for line in self.lines.feed(data) or []:
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("cmd") == "NODE_HANDLE":
                fd = self.fds.pop(0) if self.fds else None
                self.send({"cmd": "NODE_HANDLE_ACK" if fd is not None else "NODE_HANDLE_NACK"})
                out.append((msg.get("msg"), fd))
            elif not (isinstance(msg, dict) and str(msg.get("cmd", "")).startswith("NODE_")):
                out.append((msg, None))
        return out


class Worker:
    def __init__(self, fn, proto):
        self.fn = fn
        self.proto = proto
        self.stdin = Lines()
        self.deadline = None
        self.conn = None
        self.conn_lines = None
        self.pending = {}

    def on_stdin(self):
        data = os.read(0, 65536)
        if not data:
            return False
        for line in self.stdin.feed(data) or []:
            self.proto.write(call(self.fn, line, self.deadline) + "\n")
        return True

    def on_ipc(self, ipc):
        msgs = ipc.read()
        if msgs is None:
            return False
        for msg, fd in msgs:
            self.on_message(msg, fd)
        return True

    def on_message(self, msg, fd):
        if not isinstance(msg, dict):
            return
        if "lease" in msg:
            self.deadline = None if msg["lease"] is None else int(msg["lease"])
        elif "calls" in msg and fd is not None:
            conn = socket.socket(fileno=fd)
            os.set_inheritable(fd, False)
            conn.setblocking(True)
            self.pending[msg["calls"]] = (conn, bytes.fromhex(msg.get("head", "")))
        elif "go" in msg and msg["go"] in self.pending:
            # The Runtime Server has closed its copy of the connection: from now on only this
            # process reads it, so runtimed may send (it waits for the 101).
            conn, head = self.pending.pop(msg["go"])
            self.take(conn, head)

    def take(self, conn, head):
        if self.conn is not None:
            self.conn.close()
        self.conn, self.conn_lines = conn, Lines()
        try:
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: kruntimes-function-calls\r\n"
                b"Connection: Upgrade\r\nKruntimes-Call-Server: " + SERVED_BY + b"\r\n\r\n"
            )
        except OSError:
            self.drop()
            return
        if head:
            self.on_lines(head)

    def drop(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = self.conn_lines = None

    def on_conn(self):
        try:
            data = self.conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.drop()
            return
        self.on_lines(data)

    def on_lines(self, data):
        lines = self.conn_lines.feed(data)
        if lines is None:
            self.drop()
            return
        for line in lines:
            answer = call(self.fn, line, self.deadline)
            try:
                self.conn.sendall(answer.encode() + b"\n")
            except OSError:
                self.drop()
                return

    def serve(self, ipc):
        while True:
            fds = [0] + ([ipc.sock] if ipc else []) + ([self.conn] if self.conn is not None else [])
            ready, _, _ = select.select(fds, [], [])
            # The Runtime Server's messages first: a lease renewal sent before a call is applied to it.
            if ipc and ipc.sock in ready and not self.on_ipc(ipc):
                return 0
            if self.conn is not None and self.conn in ready:
                self.on_conn()
            if 0 in ready and not self.on_stdin():
                return 0


def main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.path.insert(0, os.getcwd())
    ipc_fd = os.environ.pop("NODE_CHANNEL_FD", None)
    os.environ.pop("NODE_CHANNEL_SERIALIZATION_MODE", None)
    ipc = Ipc(int(ipc_fd)) if ipc_fd else None
    try:
        fn = resolve(sys.argv[1])
    except BaseException as e:  # noqa: BLE001 - any import failure is a registration error
        proto.write(json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    proto.write(json.dumps({"ready": True}) + "\n")
    return Worker(fn, proto).serve(ipc)


if __name__ == "__main__":
    sys.exit(main())
