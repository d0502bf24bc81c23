#!/usr/bin/env python3
"""make bench-peers: vmspool beside the tools people would otherwise use
(task-spooler's tsp, nq), measured in one run on this machine and printed
as ratios, so that a table quotes what was measured side by side.

What is measured (docs/spoold.md, "Beside the peers"):

- the client alone: the wall time of one submit, median of 50, beside an
  empty Go program and /bin/true (the floor of any one-process path);
- submit to start: from before the submit to the job's first instruction
  (it creates a file), median and p90 of 50, the daemon or server warm;
- a drain: N no-op jobs submitted from a shell loop, until all have run;
  vmspool also with `spool submit --batch`;
- in-process submits: through the Go package (BenchmarkSubmit) and the
  Python client, per submit;
- a lone submit taken apart, each part run in turn with an empty Go
  program: the binary's start, a submit on tmpfs (syncs cost nothing), a
  durable submit on the disk, a minimal Go program making the same
  durable submit with raw system calls and no checks (the floor of any
  Go submit), and the disk's two syncs alone.

Environment: N (default 500), SAMPLES (default 50), BIN (default ./bin).
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("BIN") or os.path.join(TOP, "bin")
N = int(os.environ.get("N", "500"))
SAMPLES = int(os.environ.get("SAMPLES", "50"))
DRAIN_LIMIT = 120.0  # seconds: nq's drain is quadratic in its queue

sys.path.insert(0, os.path.join(TOP, "clients", "python"))
import vmspool  # noqa: E402


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def ms(x):
    return "%.2f ms" % (x * 1000)


def wall(cmd, env=None, n=SAMPLES):
    """Median wall time of running cmd n times."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def wait_file(path, limit=30.0):
    end = time.perf_counter() + limit
    while not os.path.exists(path):
        if time.perf_counter() > end:
            raise SystemExit("bench-peers: %s never appeared" % path)
        time.sleep(0.0001)
    return time.perf_counter()


def latency(submit, work):
    """submit(argv) queues argv; the job creates a file. Returns the
    submit-to-start times."""
    out = []
    for i in range(SAMPLES + 3):
        flag = os.path.join(work, "started-%d" % i)
        t0 = time.perf_counter()
        submit(["sh", "-c", ": > " + flag])
        t1 = wait_file(flag)
        if i >= 3:  # the first few warm the server up
            out.append(t1 - t0)
    return out


class Peer:
    def __init__(self, name, work):
        self.name, self.work = name, work
        os.makedirs(work)


class VMSpool(Peer):
    def __init__(self, work, workers=4):
        super().__init__("vmspool", work)
        self.spool = os.path.join(work, "spool")
        os.makedirs(self.spool)
        self.env = dict(os.environ, SPOOL_DIR=self.spool, PATH=BIN + os.pathsep + os.environ["PATH"])
        self.d = subprocess.Popen([os.path.join(BIN, "spoold"), "--workers", str(workers), "--metrics-file", "off",
                                   "--log-level", "warn"], env=self.env, stderr=subprocess.DEVNULL)
        wait_file(os.path.join(self.spool, "gate"))
        self.n = 0

    def submit(self, argv):
        self.n += 1
        subprocess.run([os.path.join(BIN, "spool"), "submit", "--chat", "c%d" % (self.n % 16), "--"] + argv,
                       env=self.env, stdout=subprocess.DEVNULL, check=True)

    def client(self):
        return wall([os.path.join(BIN, "spool"), "submit", "--chat", "client", "--", "true"], self.env)

    def shell_loop(self, n):
        return "for i in $(seq %d); do spool submit --chat c$((i %% 16)) -- true >/dev/null; done" % n

    def ended(self):
        return sum(1 for n in os.listdir(self.spool) if n.endswith(".done"))

    def drain(self, n, batch=False):
        before = self.ended()
        t0 = time.perf_counter()
        if batch:
            lines = "".join(json.dumps({"chat": "b%d" % (i % 16), "argv": ["true"]}) + "\n" for i in range(n))
            subprocess.run([os.path.join(BIN, "spool"), "submit", "--batch", "-"], input=lines.encode(),
                           env=self.env, stdout=subprocess.DEVNULL, check=True)
        else:
            subprocess.run(["sh", "-c", self.shell_loop(n)], env=self.env, check=True)
        while self.ended() < before + n:
            if time.perf_counter() - t0 > DRAIN_LIMIT:
                return None
            time.sleep(0.005)
        return time.perf_counter() - t0

    def close(self):
        self.d.send_signal(signal.SIGTERM)
        self.d.wait()


class TaskSpooler(Peer):
    def __init__(self, work, slots=4):
        super().__init__("task-spooler", work)
        self.env = dict(os.environ, TS_SOCKET=os.path.join(work, "ts.sock"), TMPDIR=work, TS_MAXFINISHED="100000")
        subprocess.run(["tsp", "-S", str(slots)], env=self.env, check=True)

    def submit(self, argv):
        subprocess.run(["tsp"] + argv, env=self.env, stdout=subprocess.DEVNULL, check=True)

    def client(self):
        return wall(["tsp", "true"], self.env)

    def drain(self, n, batch=False):
        t0 = time.perf_counter()
        subprocess.run(["sh", "-c", "for i in $(seq %d); do tsp true >/dev/null; done; tsp -w >/dev/null 2>&1 || true" % n],
                       env=self.env, check=True, timeout=DRAIN_LIMIT)
        # -w waits for the last job only: wait for none queued or running.
        while True:
            out = subprocess.run(["tsp"], env=self.env, stdout=subprocess.PIPE, text=True).stdout
            if " running " not in out and " queued " not in out:
                break
            if time.perf_counter() - t0 > DRAIN_LIMIT:
                return None
            time.sleep(0.01)
        return time.perf_counter() - t0

    def close(self):
        subprocess.run(["tsp", "-K"], env=self.env, stderr=subprocess.DEVNULL)


class NQ(Peer):
    def __init__(self, work):
        super().__init__("nq", work)
        self.env = dict(os.environ, NQDIR=os.path.join(work, "nq"))
        os.makedirs(self.env["NQDIR"])

    def submit(self, argv):
        subprocess.run(["nq", "-q"] + argv, env=self.env, check=True)

    def client(self):
        return wall(["nq", "-q", "true"], self.env)

    def drain(self, n, batch=False):
        t0 = time.perf_counter()
        try:
            subprocess.run(["sh", "-c", "for i in $(seq %d); do nq -q true; done; fq -q >/dev/null 2>&1 || true" % n],
                           env=self.env, check=True, timeout=DRAIN_LIMIT, stdout=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None
        return time.perf_counter() - t0

    def close(self):
        subprocess.run(["pkill", "-f", "nq -q"], stderr=subprocess.DEVNULL)


def round_robin(cmds, n=SAMPLES * 4):
    """Median wall time of each command, run in turn n times each, so that
    the machine's drift over the run falls on all of them alike."""
    times = [[] for _ in cmds]
    for _ in range(n):
        for i, cmd in enumerate(cmds):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def two_syncs(work, n=SAMPLES * 4):
    """The durable floor of a submit on this disk: a 100-byte file's data
    fsync'd, renamed, and its directory fsync'd, median of n."""
    d = os.path.join(work, "syncs")
    os.makedirs(d)
    dfd = os.open(d, os.O_RDONLY)
    times = []
    try:
        for i in range(n):
            t0 = time.perf_counter()
            tmp = os.path.join(d, ".t%d" % i)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
            os.write(fd, b"x" * 100)
            os.fsync(fd)
            os.close(fd)
            os.rename(tmp, os.path.join(d, "t%d" % i))
            os.fsync(dfd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(dfd)
    return statistics.median(times)


def lean_submit(work, empty, minimal):
    """Where a lone `spool submit`'s time goes, each part beside an empty Go
    program: the binary's start (--version), a submit where syncs cost
    nothing (a spool on tmpfs, when /dev/shm is one), a durable submit on
    this disk, the minimal Go program's durable submit beside it, and the
    disk's two syncs alone."""
    spool = os.path.join(BIN, "spool")
    disk = os.path.join(work, "lean-disk")
    os.makedirs(disk)
    cmds = [[empty], [spool, "--version"]]
    shm = None
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        shm = tempfile.mkdtemp(prefix="vmspool-lean-", dir="/dev/shm")
        cmds.append([spool, "--spool", shm, "submit", "--chat", "c", "--", "true"])
    least = os.path.join(work, "lean-minimal")
    os.makedirs(least)
    cmds.append([minimal, least])
    cmds.append([spool, "--spool", disk, "submit", "--chat", "c", "--", "true"])
    try:
        t = round_robin(cmds)
    finally:
        if shm:
            shutil.rmtree(shm, ignore_errors=True)
    out = {"empty": t[0], "version": t[1], "minimal": t[-2], "disk": t[-1], "tmpfs": t[2] if shm else None}
    out["syncs"] = two_syncs(work)
    return out


def go_in_process():
    """BenchmarkSubmit: a durable submit through the Go package, in ns."""
    p = subprocess.run(["go", "test", "-run", "^$", "-bench", "^BenchmarkSubmit$", "-benchtime", "200x", "./spool"],
                       cwd=TOP, stdout=subprocess.PIPE, text=True)
    for line in p.stdout.splitlines():
        f = line.split()
        if f and f[0].startswith("BenchmarkSubmit") and "ns/op" in f:
            return float(f[f.index("ns/op") - 1]) / 1e9
    return None


def python_in_process(work):
    spool = os.path.join(work, "py-spool")
    os.makedirs(spool)
    t0 = time.perf_counter()
    for i in range(200):
        vmspool.submit("p%d" % (i % 16), argv=["true"], spool=spool)
    return (time.perf_counter() - t0) / 200


# The least a durable submit can be in Go: the system calls of one (the
# spec's temporary written, fsync'd and renamed; the empty marker's
# temporary renamed; the directory fsync'd), with no checks, no flags and
# no JSON. Its time is the floor of any Go submit on this disk.
MINIMAL_SUBMIT = r"""package main

import (
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	dfd, err := syscall.Open(os.Args[1], syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Exit(1)
	}
	id := "m" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.Itoa(os.Getpid())
	spec := []byte(`{"id":"` + id + `","chat":"c","argv":["true"]}` + "\n")
	fd, err := syscall.Openat(dfd, "."+id+".json", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o640)
	if err != nil {
		os.Exit(1)
	}
	if _, err := syscall.Write(fd, spec); err != nil || syscall.Fsync(fd) != nil || syscall.Close(fd) != nil {
		os.Exit(1)
	}
	if syscall.Renameat(dfd, "."+id+".json", dfd, id+".json") != nil {
		os.Exit(1)
	}
	fd, err = syscall.Openat(dfd, "."+id+".ready", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o640)
	if err != nil || syscall.Close(fd) != nil {
		os.Exit(1)
	}
	if syscall.Renameat(dfd, "."+id+".ready", dfd, id+".ready") != nil || syscall.Fsync(dfd) != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString(id + "\n")
}
"""


def go_build(work, name, source):
    """Builds source as the program work/name, outside any module."""
    out = os.path.join(work, name)
    os.makedirs(out + "-src")
    with open(os.path.join(out + "-src", "main.go"), "w") as f:
        f.write(source)
    subprocess.run(["go", "build", "-o", out, "main.go"], cwd=out + "-src", check=True,
                   env=dict(os.environ, CGO_ENABLED="0", GO111MODULE="off"))
    return out


def main():
    for tool in ("tsp", "nq", "fq"):
        if not shutil.which(tool):
            raise SystemExit("bench-peers: %s is missing: apt-get install task-spooler nq (make bench-peers does, as root)" % tool)
    work = tempfile.mkdtemp(prefix="vmspool-peers-")
    empty = go_build(work, "empty", "package main\n\nfunc main() {}\n")
    minimal = go_build(work, "minimal-submit", MINIMAL_SUBMIT)
    rows = []
    try:
        floor_true = wall(["/bin/true"])
        floor_go = wall([empty])
        peers = [VMSpool(os.path.join(work, "vmspool")), TaskSpooler(os.path.join(work, "tsp")), NQ(os.path.join(work, "nq"))]
        res = {}
        for p in peers:
            r = res[p.name] = {}
            r["client"] = p.client()
            lat = latency(p.submit, p.work)
            r["p50"], r["p90"] = statistics.median(lat), q(lat, 0.9)
            r["drain"] = p.drain(N)
        res["vmspool"]["batch"] = peers[0].drain(N, batch=True)
        for p in peers:
            p.close()
        go = go_in_process()
        py = python_in_process(work)
        lean = lean_submit(work, empty, minimal)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    v = res["vmspool"]
    print("\nvmspool beside its peers, one run on this machine (N=%d no-op jobs, %d samples)" % (N, SAMPLES))
    print("floor: /bin/true %s, an empty Go program %s\n" % (ms(floor_true), ms(floor_go)))
    print("%-34s %12s %12s %12s   %s" % ("", "vmspool", "task-spooler", "nq", "vmspool / tsp, / nq"))

    def row(name, key, fmt=ms):
        vals = [res[p][key] for p in ("vmspool", "task-spooler", "nq")]
        shown = [fmt(x) if x is not None else "over %ds" % DRAIN_LIMIT for x in vals]
        ratio = ", ".join("%.2fx" % (vals[0] / x) if x and vals[0] else "-" for x in vals[1:])
        print("%-34s %12s %12s %12s   %s" % (name, shown[0], shown[1], shown[2], ratio))

    row("client alone, median", "client")
    row("submit to start, median", "p50")
    row("submit to start, p90", "p90")
    row("%d jobs from a shell loop" % N, "drain", lambda x: "%.2f s" % x)
    print("%-34s %12s" % ("%d jobs, spool submit --batch" % N, "%.2f s" % v["batch"] if v["batch"] else "-"))
    print("%-34s %12s   %.2fx an empty Go program" % ("spool submit alone / empty Go", ms(v["client"]), v["client"] / floor_go))
    if go:
        print("%-34s %12s" % ("in-process submit, Go package", ms(go)))
    print("%-34s %12s" % ("in-process submit, Python client", ms(py)))

    e = lean["empty"]
    print("\nA lone spool submit, each part beside an empty Go program (run in turn, %d each, no daemon)" % (SAMPLES * 4))
    print("%-40s %10s   %.2fx" % ("an empty Go program", ms(e), 1.0))
    print("%-40s %10s   %.2fx" % ("spool --version (the binary's start)", ms(lean["version"]), lean["version"] / e))
    if lean["tmpfs"]:
        print("%-40s %10s   %.2fx" % ("spool submit, spool on tmpfs (no disk)", ms(lean["tmpfs"]), lean["tmpfs"] / e))
    print("%-40s %10s   %.2fx" % ("spool submit, durable on this disk", ms(lean["disk"]), lean["disk"] / e))
    print("%-40s %10s   %.2fx" % ("a minimal durable submit in Go", ms(lean["minimal"]), lean["minimal"] / e))
    print("%-40s %10s   %.2fx" % ("the disk's two syncs alone", ms(lean["syncs"]), lean["syncs"] / e))
    print("%-40s %10s   %.2fx" % ("a durable submit's floor: empty Go + syncs", ms(e + lean["syncs"]), (e + lean["syncs"]) / e))


if __name__ == "__main__":
    main()
