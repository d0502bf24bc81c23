"""Test support for the Python tests of clients/: the real binaries, a
spool of its own per test, spoold and watchd serve as separate processes.
Not part of the client: an installer copies vmspool.py alone."""

import ctypes
import ctypes.util
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("VMSPOOL_BIN") or os.path.join(REPO, "bin")


def need_binaries(tc):
    for b in ("spool", "spoold", "watchd", "vmgate"):
        if not os.access(os.path.join(BIN, b), os.X_OK):
            tc.skipTest("no %s in %s: run make build first (make test does)" % (b, BIN))


def env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("SPOOL") and k != "JOBS_DIR"}
    e["PATH"] = BIN + os.pathsep + e.get("PATH", "/usr/bin:/bin")
    e.setdefault("GORACE", "atexit_sleep_ms=0")
    return e


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, data):
    with open(path, "w") as f:
        f.write(data)


def wait_for(what, cond, within=30.0, every=0.02):
    """Wait for cond() to be true, for at most within seconds."""
    end = time.monotonic() + within
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out after %gs waiting for %s" % (within, what))
        time.sleep(every)


class SpoolCase(unittest.TestCase):
    """A test with a spool of its own (self.spool) and helpers to start
    the daemons on it; everything started is stopped at the end."""

    def setUp(self):
        need_binaries(self)
        self.tmp = tempfile.mkdtemp(prefix="vmspool-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.spool = os.path.join(self.tmp, "spool")
        os.mkdir(self.spool, 0o750)
        self.procs = []
        self.addCleanup(self._stop_all)

    def _stop_all(self):
        for p, log in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                time.sleep(0.02)
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()

    def start(self, name, *args):
        log = open(os.path.join(self.tmp, "%s-%d.log" % (name, len(self.procs))), "w+")
        p = subprocess.Popen([os.path.join(BIN, name)] + list(args), stdout=log, stderr=log, env=env())
        self.procs.append((p, log))
        return p

    def spoold(self, *args):
        return self.start("spoold", "--spool", self.spool, *args)

    def serve(self):
        """Start watchd serve; return the page's address it printed, with
        its token (http://127.0.0.1:PORT/?token=T)."""
        addr = os.path.join(self.tmp, "addr")
        self.start("watchd", "serve", "--spool", self.spool, "--listen", "127.0.0.1:0", "--addr-file", addr)
        wait_for("watchd serve's address", lambda: os.path.exists(addr) and read(addr).strip())
        said = "the live page is at "
        log = wait_for("watchd serve's page address", lambda: said in self.logs() and self.logs())
        return log[log.index(said) + len(said):].split("\n", 1)[0].strip()

    def spool_cmd(self, *args, check=True):
        p = subprocess.run([os.path.join(BIN, "spool"), "--spool", self.spool] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), text=True)
        if check and p.returncode != 0:
            raise AssertionError("spool %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def logs(self):
        out = []
        for p, log in self.procs:
            log.flush()
            log.seek(0)
            out.append(log.read())
        return "\n".join(out)


# --- inotify, to watch the submit's order on the directory itself ----------

IN_CREATE, IN_DELETE, IN_MOVED_TO, IN_MOVED_FROM = 0x100, 0x200, 0x80, 0x40


class Inotify:
    """The kernel's own account of what happened in some directories, in
    the order it happened (one inotify instance, read after the fact)."""

    def __init__(self):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.wd = {}

    def watch(self, path):
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM)
        if wd < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch " + path)
        self.wd[wd] = path

    def events(self):
        """[(op, path)] since the last call: op is create, delete, moved_to
        or moved_from."""
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, mask, _, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
                i += 16 + n
                op = {IN_CREATE: "create", IN_DELETE: "delete", IN_MOVED_TO: "moved_to", IN_MOVED_FROM: "moved_from"}
                for bit, word in op.items():
                    if mask & bit:
                        out.append((word, os.path.join(self.wd.get(wd, "?"), name)))

    def close(self):
        os.close(self.fd)
