"""What the client's own writer does to the tree beside `spool submit`
when they race: one id is one job (docs/clients.md). What a single
submit writes, refuses and says is the writers' contract,
tests/testdata/contract/submit.json, run against this client by
tests/contract_test.go."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vmspool  # noqa: E402
from _testing import BIN, SpoolCase, env, read  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# One submit by the client in a process of its own, printing OK or the error.
PY_SUBMIT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import vmspool
try:
    vmspool.submit("c", argv=["echo", sys.argv[3]], job_id=sys.argv[4], spool=sys.argv[2])
    print("OK")
except vmspool.SpoolError as e:
    print("ERR", e)
"""


class TakeTest(SpoolCase):
    def test_one_id_is_one_job(self):
        # Two clients, `spool submit --id` and `spool submit --batch`, all
        # at once with one id: exactly one queues it, the others are told
        # it already exists, and the spec is the winner's. Before the take
        # was atomic, two of them often both succeeded.
        for rnd in range(15):
            job = "same.%d" % rnd
            procs = []
            for who in ("py1", "py2"):
                procs.append((who, subprocess.Popen([sys.executable, "-c", PY_SUBMIT, HERE, self.spool, who, job],
                                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
            procs.append(("go", subprocess.Popen(
                [os.path.join(BIN, "spool"), "--spool", self.spool, "submit", "--chat", "c", "--id", job, "--", "echo", "go"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())))
            batch = subprocess.Popen([os.path.join(BIN, "spool"), "--spool", self.spool, "submit", "--batch", "-"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())
            procs.append(("batch", batch))
            batch.stdin.write(json.dumps({"id": job, "chat": "c", "argv": ["echo", "batch"]}) + "\n")
            batch.stdin.close()
            won = []
            for who, p in procs:
                out = p.stdout.read()
                p.stdout.close()
                code = p.wait()
                ok = out.startswith("OK") if who.startswith("py") else code == 0
                if ok:
                    won.append(who)
                else:
                    self.assertIn("already exists", out, (who, out))
            self.assertEqual(len(won), 1, "round %d: %s all queued %s" % (rnd, won, job))
            spec = json.loads(read(os.path.join(self.spool, job + ".json")))
            self.assertEqual(spec["argv"][1], won[0])
        self.assertEqual([n for n in os.listdir(self.spool) if n.startswith(".")], [])

    def test_take_never_replaces(self):
        # Whichever way the filesystem lets a name be taken.
        job = self.spool_cmd("submit", "--chat", "c", "--", "echo", "first").stdout.strip()
        before = read(os.path.join(self.spool, job + ".json"))
        saved = vmspool._renameat2
        self.addCleanup(setattr, vmspool, "_renameat2", saved)
        for r2 in (None, False):  # renameat2 where libc has it; link(2) without
            vmspool._renameat2 = r2
            dfd = os.open(self.spool, os.O_RDONLY | os.O_DIRECTORY)
            try:
                with self.assertRaises(FileExistsError):
                    vmspool._write_durable(dfd, job + ".json", b'{"chat":"c","argv":["evil"]}', take=True)
                vmspool._write_durable(dfd, "fresh.json", b"{}", take=True)
                os.unlink("fresh.json", dir_fd=dfd)
            finally:
                os.close(dfd)
        self.assertEqual(read(os.path.join(self.spool, job + ".json")), before)
        self.assertEqual([n for n in os.listdir(self.spool) if n.startswith(".")], [])


class DoorbellTest(SpoolCase):
    """The client rings the doorbell after the marker, as spool submit does
    (docs/spoold.md, "Claiming"): a hint, never needed to queue a job."""

    def test_rings_after_the_marker(self):
        bell = os.path.join(self.spool, "doorbell")
        os.mkdir(bell, 0o750)
        job = vmspool.submit("c", argv=["true"], spool=self.spool)
        self.assertTrue(os.path.exists(os.path.join(bell, job)))
        # Rung again (queued again before its bell was taken): a new file,
        # so that doorbell/'s names change.
        before = os.lstat(os.path.join(bell, job)).st_ino
        for ext in (".json", ".ready"):
            os.unlink(os.path.join(self.spool, job + ext))
        vmspool.submit("c", argv=["true"], job_id=job, spool=self.spool)
        self.assertNotEqual(os.lstat(os.path.join(bell, job)).st_ino, before)
        self.assertEqual(sorted(os.listdir(bell)), [job])

    def test_no_doorbell(self):
        # No doorbell/ (an older daemon's spool): queued all the same, and
        # none made; a symlink there: nothing written through it.
        job = vmspool.submit("c", argv=["true"], spool=self.spool)
        self.assertTrue(os.path.exists(os.path.join(self.spool, job + ".ready")))
        self.assertFalse(os.path.exists(os.path.join(self.spool, "doorbell")))
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.mkdir(elsewhere)
        os.symlink(elsewhere, os.path.join(self.spool, "doorbell"))
        job = vmspool.submit("c", argv=["true"], spool=self.spool)
        self.assertTrue(os.path.exists(os.path.join(self.spool, job + ".ready")))
        self.assertEqual(os.listdir(elsewhere), [])


if __name__ == "__main__":
    unittest.main()
