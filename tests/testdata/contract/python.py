"""The Python client as a writer of the contract's cases, for
tests/contract_test.go: one request a line on stdin, {"spool", "spec",
"env"}, one answer a line on stdout: {"id"}, {"error": the exception's
class, "message"}, or {"skip": why the client cannot be given the spec}.
argv[1] is the client's directory (clients/python)."""

import json
import os
import sys

sys.path.insert(0, sys.argv[1])

import vmspool  # noqa: E402

# The spec's fields and submit()'s parameters that say them.
PARAMS = {"id": "job_id", "chat": "chat", "argv": "argv", "script": "script", "cwd": "cwd", "env": "env",
          "timeout": "timeout", "attempts": "attempts"}
FLOOR = ("SPOOL_MIN_FREE", "SPOOL_MIN_FREE_PERCENT", "SPOOL_MIN_FREE_INODES")


def answer(req):
    spec = req["spec"]
    other = sorted(set(spec) - set(PARAMS))
    if other:
        return {"skip": "the Python client's submit() has no parameter for %s" % ", ".join(map(json.dumps, other))}
    for k in FLOOR:
        os.environ.pop(k, None)
    os.environ.update(req["env"])
    kw = {PARAMS[k]: v for k, v in spec.items()}
    chat = kw.pop("chat", None)
    try:
        return {"id": vmspool.submit(chat, spool=req["spool"], **kw)}
    except Exception as e:  # any exception is the answer: the runner judges its class
        return {"error": type(e).__name__, "message": str(e)}


for line in sys.stdin:
    print(json.dumps(answer(json.loads(line))), flush=True)
