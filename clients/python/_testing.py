"""Test support for the Python tests of clients/: the real binaries, a
spool of its own per test, spoold and watchd serve as separate processes.
Not part of the client: an installer copies vmspool.py alone."""

import os
import shutil
import signal
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
        time.sleep(every)  # the poll of the wait


def follower_watching(chat):
    """Whether a `watchd follow --chat CHAT` of this machine holds an
    inotify watch: it has taken its start stamp and watches the chat's
    progress, so that a run submitted now is its run."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = read("/proc/%s/cmdline" % pid, "rb").split(b"\0")
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        if b"follow" not in argv or os.path.basename(argv[0]) != b"watchd" or chat.encode() not in argv:
            continue
        for fd in fds:
            try:
                if "inotify" in os.readlink("/proc/%s/fd/%s" % (pid, fd)):
                    return True
            except OSError:
                pass
    return False


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
                # Two SIGTERMs, the daemons' "stop now"; apart, or the
                # kernel may merge them into one while the first is
                # pending (a missed second one costs the grace, not the
                # test).
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
