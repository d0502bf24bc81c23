"""The Python client against the real binaries (make build first; make
test does): python3 -m unittest discover -s clients -t clients"""

import os
import random
import string
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vmspool  # noqa: E402
from _testing import BIN, SpoolCase, env  # noqa: E402


class SubmitTest(SpoolCase):
    # What submit() writes, refuses and says is the writers' contract,
    # one set of cases for this client and the Go side alike:
    # tests/testdata/contract/submit.json, run by tests/contract_test.go
    # (TestContract: the order on the directory, the modes, the owner, the
    # floor, ids, every spec field, symlinks in the way).

    def test_ids(self):
        ids = {vmspool.new_job_id() for _ in range(1000)}
        self.assertEqual(len(ids), 1000)
        for i in ids:
            self.assertTrue(vmspool.valid_id(i) and len(i) == 26, i)
        self.assertLess(vmspool.new_job_id(1000.0), vmspool.new_job_id(2000.0))

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

    def test_resolve_spool_system(self):
        # The system spool is found by who may read it, when the caller has
        # no per-user spool; a per-user spool that exists wins.
        r = vmspool.resolve_spool
        with tempfile.TemporaryDirectory() as d:
            system, home = os.path.join(d, "vm"), os.path.join(d, "home")
            os.mkdir(system)
            os.mkdir(home)
            env = {"HOME": home}
            user = os.path.join(home, ".local", "state", "vmspool")
            self.assertEqual(r(None, env, 1000, system, lambda p: True), system)
            self.assertEqual(r(None, env, 1000, system, lambda p: False), user)
            self.assertEqual(r(None, env, 1000, os.path.join(d, "none"), lambda p: True), user)
            self.assertEqual(r(None, env, 0, system, lambda p: False), system)
            os.makedirs(user)
            self.assertEqual(r(None, env, 1000, system, lambda p: True), user)


class OpenWebUIChatTest(unittest.TestCase):
    # Every call of Open WebUI gets a chat id (docs/clients.md, "Chat ids").
    def test_openwebui_chat(self):
        uuid = "3f0c2a9e-5b1d-4c2e-9a57-0d6c1e2b7f41"
        self.assertEqual(vmspool.openwebui_chat({"chat_id": uuid}), uuid)
        self.assertEqual(vmspool.openwebui_chat(None, uuid), uuid)
        self.assertEqual(vmspool.openwebui_chat({"chat_id": "chat-42"}), "chat-42")
        self.assertEqual(vmspool.openwebui_chat({"chat_id": "local:AbC_d-9xYz12345678"}), "local-AbC_d-9xYz12345678")
        odd = vmspool.openwebui_chat({"chat_id": "local:a/b"})
        self.assertRegex(odd, r"\Alocal_[0-9a-f]{32}\Z")
        self.assertEqual(odd, vmspool.openwebui_chat({"chat_id": "local:a/b"}))
        self.assertEqual(vmspool.openwebui_chat({"user_id": "u7"}), "api-u7")
        self.assertEqual(vmspool.openwebui_chat({"chat_id": ""}, None, {"id": "u8"}), "api-u8")
        self.assertEqual(vmspool.openwebui_chat({}), "api_anonymous")
        self.assertEqual(vmspool.openwebui_chat({"user_id": ""}), "api_anonymous")
        self.assertRegex(vmspool.openwebui_chat({"user_id": "a@b c"}), r"\Aapi_[0-9a-f]{32}\Z")
        self.assertRegex(vmspool.openwebui_chat({"chat_id": "not a valid id"}), r"\Achat_[0-9a-f]{32}\Z")
        for m in ({"chat_id": "x" * 200}, {"chat_id": "../x"}, {"chat_id": "local:" + "y" * 200}):
            self.assertTrue(vmspool.valid_id(vmspool.openwebui_chat(m)), m)

    # Third round: two chats of Open WebUI must never share the spool's
    # chat (its runs, its questions, its answers). A raw id that reads as
    # a derived one used to be passed through as it was.
    def test_raw_and_derived_never_meet(self):
        c = vmspool.openwebui_chat
        pairs = [
            ({"chat_id": "local-abc"}, {"chat_id": "local:abc"}),
            ({"chat_id": "api-u1"}, {"user_id": "u1"}),
            ({"chat_id": "api-u1"}, {"chat_id": ""}, {"id": "u1"}),
            ({"chat_id": "api-anonymous"}, {}),
            ({"user_id": "anonymous"}, {}),
            ({"chat_id": "api_anonymous"}, {}),
            ({"chat_id": "local-" + "0" * 32}, {"chat_id": "local:" + "0" * 32}),
        ]
        for p in pairs:
            a, b = p[0], p[1]
            user = p[2] if len(p) > 2 else None
            self.assertNotEqual(c(a), c(b, None, user), p)
        # The id a chat id breaking the rule is hashed to, given as a chat
        # id, a socket id or a user id of its own.
        for odd in ("a b", "x" * 200, "../x", "é"):
            for m in ({"chat_id": odd}, {"chat_id": "local:" + odd}, {"user_id": odd}):
                derived = c(m)
                self.assertTrue(vmspool.valid_id(derived), (m, derived))
                self.assertNotEqual(c({"chat_id": derived}), derived, m)
                rest = derived.split("_", 1)[1]
                for again in ({"chat_id": rest}, {"chat_id": "local:" + rest}, {"user_id": rest}):
                    self.assertNotEqual(c(again), derived, (m, again))

    def test_mapping_is_one_to_one(self):
        # Many calls, random and adversarial: no two different calls get
        # one chat id, and every id is an id. A call is its raw chat id
        # (metadata's or __chat_id__), and, with none, its user id ("" is
        # no user).
        rnd = random.Random(20251231)
        alphabet = (string.ascii_letters + string.digits + "._-:" * 6 + "/ @+%\x00\u00e9\u00df\u4e2d\U0001f600\ud800")
        prefixes = ("", "", "local:", "local-", "local_", "api-", "api_", "chat-", "chat_", "-", "_", ".", ":")

        def word():
            n = rnd.choice((0, 1, 2, 5, 20, 36, rnd.randint(0, 300), rnd.randint(118, 130)))
            return rnd.choice(prefixes) + "".join(rnd.choice(alphabet) for _ in range(n))

        calls = {("", None)}
        for _ in range(3000):
            calls.add((word(), None))
            uid = word()
            calls.add(("", uid or None))
        calls.update(("local:" + s, None) for s in ("", "abc", "0" * 32))
        calls.update(("", u) for u in ("anonymous", "u1", "0" * 32))
        seen = {}

        def call(raw, uid):
            if (raw, uid) in seen:
                return seen[(raw, uid)]
            if raw:
                got = vmspool.openwebui_chat({"chat_id": raw})
                self.assertEqual(vmspool.openwebui_chat(None, raw), got)
                self.assertEqual(vmspool.openwebui_chat({"chat_id": raw, "user_id": "u9"}, None, {"id": "u9"}), got)
            else:
                got = vmspool.openwebui_chat({"user_id": uid} if uid is not None else {})
                self.assertEqual(vmspool.openwebui_chat({"chat_id": ""}, None, {"id": uid}), got)
            self.assertTrue(vmspool.valid_id(got), (raw, uid, got))
            seen[(raw, uid)] = got
            return got

        # Every id made is given back as a chat id, a socket id and a user
        # id, as is what follows its kind, twice over.
        for _ in range(2):
            made = {call(raw, uid) for raw, uid in sorted(calls, key=repr)}
            for d in made:
                for part in (d, d.split("-", 1)[-1], d.split("_", 1)[-1], d.replace("-", ":", 1)):
                    calls.update({(part, None), ("local:" + part, None), ("", part)} - {("", "")})
        for raw, uid in calls:
            call(raw, uid)
        owner, shared = {}, []
        for key, got in seen.items():
            if got in owner:
                shared.append("%r and %r both get %r" % (owner[got], key, got))
            owner[got] = key
        self.assertEqual(shared[:5], [], "%d ids shared" % len(shared))
        self.assertGreater(len(owner), 10000)

    def test_page_of(self):
        self.assertEqual(vmspool.page_of("http://127.0.0.1:8377/?token=secret", "c1"), "http://127.0.0.1:8377/#chat=c1")
        self.assertEqual(vmspool.page_of("https://w.example.org/vm", "c1"), "https://w.example.org/vm#chat=c1")
        self.assertEqual(vmspool.page_of("", "c1"), "")
        self.assertEqual(vmspool.page_of("http://127.0.0.1:8377/#token=secret", "c1"), "http://127.0.0.1:8377/#chat=c1")

    def test_watch_address_token(self):
        # The address watchd serve prints (#token=T) and the one it printed
        # before (?token=T) both carry the token.
        for url in ("http://127.0.0.1:8377/#token=abc", "http://127.0.0.1:8377/?token=abc",
                    "http://127.0.0.1:8377/#chat=c1&token=abc"):
            _, _, tok, shown = vmspool._watch_address(url)
            self.assertEqual(tok, "abc", url)
            self.assertNotIn("abc", shown, url)


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
        # The address watchd serve printed, with its token (#token=T), and
        # the form it printed before (?token=T).
        url = self.serve()
        self.assertIn("/#token=", url)
        self.run_story(url=url)
        self.run_story(url=url.replace("/#token=", "/?token="))

    def test_follow_over_watchd_serve_socket(self):
        # Its unix socket: no token, the socket's mode decides.
        self.serve()
        self.run_story(url="unix:" + os.path.join(self.spool, "watchd", "serve.sock"))

    def test_follow_over_watchd_serve_tokens(self):
        page = self.serve()
        bare = page.split("/#token=")[0]
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
        self.assertNotIn(page.split("#token=")[1], str(cm.exception))
        with self.assertRaises(vmspool.SpoolError) as cm:
            list(vmspool.follow("story", url=page.replace("#token=", "#token=x"), spool=elsewhere, timeout=5))
        self.assertIn("401", str(cm.exception))
        self.assertNotIn(page.split("#token=")[1], str(cm.exception))

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
