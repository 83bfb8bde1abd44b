"""Runs argv on a new pseudo-terminal for a session operation with a TTY.

Node has no pseudo-terminal API without a native addon, so the Runtime Server starts this
bridge (python3 is in the Runtime images) instead of the command:
  fd 0  bytes for the terminal (keyboard input); EOF sends ^D
  fd 1  everything the program writes to its terminal
  fd 3  resize requests, one JSON object per line: {"Width": cols, "Height": rows}
The exit status is the program's (128+N when a signal N ended it).
Environment: KRT_TTY_COLS / KRT_TTY_ROWS give the initial size.
"""
import fcntl
import json
import os
import pty
import select
import struct
import sys
import termios


def set_size(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def main():
    argv = sys.argv[1:]
    if not argv:
        sys.stderr.write("pty-bridge: no command\n")
        return 2
    cols = int(os.environ.pop("KRT_TTY_COLS", "80"))
    rows = int(os.environ.pop("KRT_TTY_ROWS", "24"))
    os.environ.setdefault("TERM", "xterm-256color")
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as err:
            sys.stderr.write("%s: %s\n" % (argv[0], err.strerror))
            os._exit(127)
    # Set in the parent only: resize requests read below are applied after it, never overwritten.
    set_size(master, cols, rows)
    watch = [0, master, 3]
    pending = b""
    while master in watch:
        readable, _, _ = select.select(watch, [], [])
        # Resizes first: one sent before input must apply before the program reads that input.
        if 3 in readable:
            data = os.read(3, 4096)
            if not data:
                watch.remove(3)
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                try:
                    size = json.loads(line)
                    set_size(master, int(size["Width"]), int(size["Height"]))
                except (ValueError, KeyError, TypeError, OSError):
                    pass
        if 0 in readable:
            data = os.read(0, 65536)
            if data:
                os.write(master, data)
            else:
                os.write(master, b"\x04")
                watch.remove(0)
        if master in readable:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            if not data:
                watch.remove(master)
            else:
                os.write(1, data)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
