"""The Python client against the real binaries (make build first; make
test does): python3 -m unittest discover -s clients -t clients"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vmspool  # noqa: E402
from _testing import BIN, Inotify, SpoolCase, env, read, write  # noqa: E402


def listing(root):
    """Every name under root with its content and mtime: the tree as an
    operator's ls -lR would show it."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            data = read(p, "rb") if os.path.isfile(p) and not os.path.islink(p) else None
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_mtime_ns, data)
    return out


class SubmitTest(SpoolCase):
    def test_order_on_the_directory(self):
        # The last run of the chat left its progress and its answer.
        os.makedirs(os.path.join(self.spool, "progress"))
        os.makedirs(os.path.join(self.spool, "chats", "c1"))
        write(os.path.join(self.spool, "progress", "c1"), '{"done":true}')
        write(os.path.join(self.spool, "chats", "c1", "answer.json"), '{"answer":"old"}')
        ino = Inotify()
        self.addCleanup(ino.close)
        for d in ("", "progress", os.path.join("chats", "c1")):
            ino.watch(os.path.join(self.spool, d))
        job = vmspool.submit("c1", argv=["echo", "hi"], timeout=60, attempts=2, env={"A": "1"}, spool=self.spool)
        seen = [(op, os.path.relpath(p, self.spool)) for op, p in ino.events()]
        moved = [p for op, p in seen if op == "moved_to"]
        self.assertEqual(moved, [job + ".json", job + ".ready"], seen)
        order = [p for op, p in seen if op in ("moved_to", "delete")]
        self.assertEqual(order, [job + ".json", "progress/c1", "chats/c1/answer.json", job + ".ready"], seen)
        # Every name created is a dot temporary renamed into place.
        for op, p in seen:
            if op == "create":
                self.assertTrue(os.path.basename(p).startswith("."), seen)
        # The spool's own commands read it as one of theirs.
        shown = json.loads(self.spool_cmd("show", "--json", job).stdout)
        self.assertEqual(shown["state"], "queued")
        self.assertEqual(shown["spec"]["argv"], ["echo", "hi"])
        self.assertEqual(shown["spec"]["env"], {"A": "1"})
        self.assertEqual(shown["spec"]["attempts"], 2)
        self.assertEqual(shown["spec"]["timeout"], "1m0s")
        self.assertEqual(self.spool_cmd("fsck").returncode, 0)
        for name in (job + ".json", job + ".ready"):
            self.assertEqual(os.stat(os.path.join(self.spool, name)).st_mode & 0o777, 0o640)

    def test_bad_input_touches_nothing(self):
        vmspool.submit("warm", argv=["true"], spool=self.spool)
        before = listing(self.spool)
        go = subprocess.run([os.path.join(BIN, "spool"), "--spool", self.spool, "submit", "--chat", "bad chat", "--", "true"],
                            stderr=subprocess.PIPE, text=True, env=env())
        self.assertEqual(go.returncode, 2)
        cases = [
            (vmspool.InvalidID, dict(chat="bad chat", argv=["true"])),
            (vmspool.InvalidID, dict(chat="../etc", argv=["true"])),
            (vmspool.InvalidID, dict(chat=".hidden", argv=["true"])),
            (vmspool.InvalidID, dict(chat="c", argv=["true"], job_id="a/b")),
            (vmspool.SpoolError, dict(chat="c")),
            (vmspool.SpoolError, dict(chat="c", argv=["true"], script="true")),
            (vmspool.SpoolError, dict(chat="c", argv=[])),
            (vmspool.SpoolError, dict(chat="c", script="  ")),
            (vmspool.SpoolError, dict(chat="c", argv=["true"], env={"A=B": "x"})),
            (vmspool.SpoolError, dict(chat="c", argv=["true"], attempts=0)),
        ]
        for exc, kw in cases:
            with self.subTest(kw=kw):
                chat = kw.pop("chat")
                with self.assertRaises(exc) as cm:
                    vmspool.submit(chat, spool=self.spool, **kw)
                self.assertNotIn("\n", str(cm.exception))
        # The same one-line message as the Go side's.
        with self.assertRaises(vmspool.InvalidID) as cm:
            vmspool.submit("bad chat", argv=["true"], spool=self.spool)
        self.assertEqual("spool submit: " + str(cm.exception), go.stderr.strip())
        with self.assertRaises(vmspool.SpoolError) as cm:
            vmspool.submit("c", argv=["true"], spool=os.path.join(self.tmp, "nope"))
        self.assertIn("no such spool directory", str(cm.exception))
        self.assertEqual(listing(self.spool), before)

    def test_floor(self):
        # The spool's own disk is far above any floor; a floor above what
        # it has refuses, in one line, and touches nothing.
        before = listing(self.spool)
        huge = {"SPOOL_MIN_FREE": "1000000T"}
        with self.assertRaises(vmspool.SpoolError) as cm:
            vmspool._check_floor(self.spool, huge)
        self.assertIn("below the free-space floor", str(cm.exception))
        os.environ.update(huge)
        try:
            with self.assertRaises(vmspool.SpoolError):
                vmspool.submit("c", argv=["true"], spool=self.spool)
        finally:
            del os.environ["SPOOL_MIN_FREE"]
        self.assertEqual(listing(self.spool), before)
        vmspool._check_floor(self.spool, {"SPOOL_MIN_FREE": "0", "SPOOL_MIN_FREE_PERCENT": "0"})

    def test_symlinked_progress_is_removed_not_followed(self):
        outside = os.path.join(self.tmp, "outside")
        write(outside, "keep")
        os.makedirs(os.path.join(self.spool, "progress"))
        os.symlink(outside, os.path.join(self.spool, "progress", "c"))
        vmspool.submit("c", argv=["true"], spool=self.spool)
        self.assertFalse(os.path.lexists(os.path.join(self.spool, "progress", "c")))
        self.assertEqual(read(outside), "keep")

    def test_ids(self):
        ids = {vmspool.new_job_id() for _ in range(1000)}
        self.assertEqual(len(ids), 1000)
        for i in ids:
            self.assertTrue(vmspool.valid_id(i) and len(i) == 26, i)
        self.assertLess(vmspool.new_job_id(1000.0), vmspool.new_job_id(2000.0))
        self.assertFalse(vmspool.valid_id("x" * 129))
        self.assertTrue(vmspool.valid_id("x" * 128))

    def test_answer_hint_pasted(self):
        # Second review, 2: a question id of `x $(touch P) #` went into the
        # hint as it was, and the line ran touch when pasted. The hint
        # quotes every word and names only a question whose id is an id.
        pasted = os.path.join(self.tmp, "pasted")
        evil = "x $(touch %s) #" % pasted
        cases = [("c1", {"id": evil}), ("c1", {"id": "q-1"}), ("c1", {}),
                 ("it's $(touch %s)" % pasted, {"id": "q1"})]
        for chat, q in cases:
            line = vmspool.answer_hint(chat, vmspool.Question(q))
            self.assertTrue(line.endswith(" TEXT"), line)
            if q.get("id") in ("q-1", "q1"):
                self.assertIn("--question %s " % q["id"], line)
            else:
                self.assertNotIn("--question", line)
            e = env()
            e["SPOOL_DIR"] = self.spool
            subprocess.run(["sh", "-c", line.replace("TEXT", "yes")], env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
            self.assertFalse(os.path.exists(pasted), "pasting %r ran a command" % line)

    def test_resolve_spool(self):
        r = vmspool.resolve_spool
        self.assertEqual(r("/a", {"SPOOL_DIR": "/b"}, 1000), "/a")
        self.assertEqual(r(None, {"SPOOL_DIR": "/b", "JOBS_DIR": "/c"}, 1000), "/b")
        self.assertEqual(r(None, {"JOBS_DIR": "/c"}, 0), "/c")
        self.assertEqual(r(None, {}, 0), "/var/spool/vm")
        self.assertEqual(r(None, {"XDG_STATE_HOME": "/x", "HOME": "/h"}, 1000), "/x/vmspool")
        self.assertEqual(r(None, {"HOME": "/h"}, 1000), "/h/.local/state/vmspool")


class OpenWebUIChatTest(unittest.TestCase):
    # Every call of Open WebUI gets a chat id (docs/clients.md, "Chat ids").
    def test_openwebui_chat(self):
        uuid = "3f0c2a9e-5b1d-4c2e-9a57-0d6c1e2b7f41"
        self.assertEqual(vmspool.openwebui_chat({"chat_id": uuid}), uuid)
        self.assertEqual(vmspool.openwebui_chat(None, uuid), uuid)
        self.assertEqual(vmspool.openwebui_chat({"chat_id": "local:AbC_d-9xYz12345678"}), "local-AbC_d-9xYz12345678")
        odd = vmspool.openwebui_chat({"chat_id": "local:a/b"})
        self.assertRegex(odd, r"\Alocal-[0-9a-f]{32}\Z")
        self.assertEqual(odd, vmspool.openwebui_chat({"chat_id": "local:a/b"}))
        self.assertEqual(vmspool.openwebui_chat({"user_id": "u7"}), "api-u7")
        self.assertEqual(vmspool.openwebui_chat({"chat_id": ""}, None, {"id": "u8"}), "api-u8")
        self.assertEqual(vmspool.openwebui_chat({}), "api-anonymous")
        self.assertRegex(vmspool.openwebui_chat({"user_id": "a@b c"}), r"\Aapi-[0-9a-f]{32}\Z")
        for m in ({"chat_id": "x" * 200}, {"chat_id": "../x"}, {"chat_id": "local:" + "y" * 200}):
            self.assertTrue(vmspool.valid_id(vmspool.openwebui_chat(m)), m)

    def test_page_of(self):
        self.assertEqual(vmspool.page_of("http://127.0.0.1:8377/?token=secret", "c1"), "http://127.0.0.1:8377/#chat=c1")
        self.assertEqual(vmspool.page_of("https://w.example.org/vm", "c1"), "https://w.example.org/vm#chat=c1")
        self.assertEqual(vmspool.page_of("", "c1"), "")


class GateTest(SpoolCase):
    # The old detector's own cases: every one a real command line from the
    # session that failed, and what must never be caught.
    WRITES = [
        ("cd /mnt/project && git add -A && git status --short", "add"),
        ("cd /mnt/project && git config --global --add safe.directory /mnt/project "
         "&& git add -A && git status --short", "config"),
        ("cd /mnt/project && export HOME=/root && git -c safe.directory=/mnt/project add -A "
         "&& git -c safe.directory=/mnt/project commit -m 'x'", "add"),
        ("git -C /mnt/project commit -m x", "commit"),
        ("/usr/bin/git push origin main", "push"),
    ]
    ALLOWED = [
        "git log --oneline -1",
        "git status --short",
        "python3 -c 'print(\"git add is a string\")'",
        "grep -n 'git commit' notes.txt",
        "ls -la /mnt/project",
        "echo git commit > /tmp/note.txt",
    ]

    def test_old_detector_cases(self):
        for script, want in self.WRITES:
            with self.subTest(script=script):
                self.assertEqual(vmspool.git_write_in(script, bin_dir=BIN), want)
        for script in self.ALLOWED:
            with self.subTest(script=script):
                self.assertIsNone(vmspool.git_write_in(script, bin_dir=BIN))

    def test_verdict_names_the_commit_tool(self):
        v = vmspool.gate("git commit -m x", commit_tool="publish_changes", bin_dir=BIN)
        self.assertFalse(v.allowed)
        self.assertEqual((v.git, v.reason), ("commit", "git-write"))
        self.assertIn("publish_changes", v.message)
        self.assertIn("dubious ownership", v.message)
        self.assertEqual(vmspool.git_write_in('eval "$X"', bin_dir=BIN), "undecidable")


class RunTest(SpoolCase):
    SCRIPT = r'''spool say "step one"
ans=$(spool ask --options yes,no "Deploy now?") || exit 9
spool say "step two: $ans"
exit 0'''

    def run_story(self, **follow_kw):
        self.spoold()
        job = vmspool.submit("story", argv=["sh", "-c", self.SCRIPT], spool=self.spool)
        seen = []
        for ev in vmspool.follow("story", job, spool=self.spool, bin_dir=BIN, timeout=60, **follow_kw):
            seen.append(ev)
            if ev.kind == "question":
                self.assertEqual(ev.question.text, "Deploy now?")
                self.assertEqual(ev.question.options, ["yes", "no"])
                self.assertTrue(ev.question.id)
                vmspool.answer("story", "yes", question=ev.question.id, spool=self.spool, bin_dir=BIN)
        kinds = [e.kind for e in seen]
        self.assertEqual(kinds[-1], "end", kinds)
        end = seen[-1]
        self.assertEqual((end.state, end.exit, end.done, end.job), ("done", 0, True, job))
        texts = [e.text for e in seen]
        self.assertIn("step one", texts)
        self.assertIn("step two: yes", texts)
        self.assertIn("question", kinds)
        self.assertEqual(vmspool.state(job, spool=self.spool, bin_dir=BIN), "done")
        self.assertEqual(vmspool.result(job, spool=self.spool, bin_dir=BIN)["exit"], 0)
        return job

    def test_follow_with_watchd_follow(self):
        self.run_story()

    def test_follow_over_watchd_serve(self):
        # The address watchd serve printed, with its token.
        url = self.serve()
        self.assertIn("?token=", url)
        self.run_story(url=url)

    def test_follow_over_watchd_serve_socket(self):
        # Its unix socket: no token, the socket's mode decides.
        self.serve()
        self.run_story(url="unix:" + os.path.join(self.spool, "watchd", "serve.sock"))

    def test_follow_over_watchd_serve_tokens(self):
        page = self.serve()
        bare = page.split("/?token=")[0]
        # Without a token in the address, the spool's watchd/token (this
        # user may read it).
        self.run_story(url=bare)
        # No token at all: refused, saying so.
        elsewhere = os.path.join(self.tmp, "not-the-spool")
        os.mkdir(elsewhere)
        with self.assertRaises(vmspool.SpoolError) as cm:
            list(vmspool.follow("story", url=bare, spool=elsewhere, timeout=5))
        self.assertIn("401", str(cm.exception))
        self.assertIn("token", str(cm.exception))
        self.assertNotIn(page.split("?token=")[1], str(cm.exception))
        with self.assertRaises(vmspool.SpoolError) as cm:
            list(vmspool.follow("story", url=page.replace("?token=", "?token=x"), spool=elsewhere, timeout=5))
        self.assertIn("401", str(cm.exception))
        self.assertNotIn(page.split("?token=")[1], str(cm.exception))

    def test_answer_and_cancel_errors(self):
        with self.assertRaises(vmspool.NoQuestion):
            vmspool.answer("nobody", "x", spool=self.spool, bin_dir=BIN)
        with self.assertRaises(vmspool.NoSuchJob):
            vmspool.show("01NOSUCHJOB", spool=self.spool, bin_dir=BIN)
        with self.assertRaises(vmspool.InvalidID):
            vmspool.cancel("../x", spool=self.spool, bin_dir=BIN)

    def test_cancel_a_running_job(self):
        self.spoold()
        job = vmspool.submit("long", argv=["sh", "-c", "spool say started; sleep 60"], spool=self.spool)
        for ev in vmspool.follow("long", job, spool=self.spool, bin_dir=BIN, timeout=30):
            if ev.text == "started":
                break
        self.assertEqual(vmspool.cancel(job, wait=20, spool=self.spool, bin_dir=BIN), "cancelled")
        self.assertEqual(vmspool.state(job, spool=self.spool, bin_dir=BIN), "cancelled")

    def test_follow_timeout(self):
        evs = list(vmspool.follow("quiet", spool=self.spool, bin_dir=BIN, timeout=0.5))
        self.assertEqual(len(evs), 1)
        self.assertTrue(evs[0].done)
        self.assertEqual(evs[0].state, "timeout")


if __name__ == "__main__":
    unittest.main()
