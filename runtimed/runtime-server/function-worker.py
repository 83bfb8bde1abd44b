"""Warm Python function worker of the Runtime Server (functions.ts).

argv[1] is the handler `pkg.module.function`, resolved relative to the working directory. The
module is imported once, at registration; then each stdin line is one invocation
({"payload": <json>}) answered by one stdout line ({"ok": true, "output": <json>} or
{"ok": false, "error": "..."}). The function's own prints go to stderr so they never corrupt
the protocol.
"""
import importlib
import json
import os
import sys
import traceback


def resolve(handler):
    module_name, _, attr = handler.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"handler {handler!r} must be pkg.module.function")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"handler {handler!r}: {attr!r} is not a callable of module {module_name!r}")
    return fn


def main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.path.insert(0, os.getcwd())
    try:
        fn = resolve(sys.argv[1])
    except BaseException as e:  # noqa: BLE001 - any import failure is a registration error
        proto.write(json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            payload = json.loads(line)["payload"]
            out = {"ok": True, "output": fn(payload)}
            text = json.dumps(out)
        except BaseException as e:  # noqa: BLE001 - the error goes back to the caller
            tb = traceback.format_exc(limit=5)
            text = json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}", "trace": tb[-4000:]})
        proto.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
