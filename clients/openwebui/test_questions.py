"""Every question reaches an answer, wherever the person is: the tools
played by Open WebUI as _openwebui.py plays it (a dialog that never
returns, Escape, a tab closed before and during the dialog, another chat
on screen, the stop button during a dialog, a temporary chat, an API
call), against real spoold and watchd serve. Each test is a line of the
issue's "Done when", and each checks that the last status is done.
"""

import asyncio
import http.client
import json
import os
import re
import sys
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "python")
sys.path.insert(0, CLIENT)

from _testing import BIN, SpoolCase, follower_watching, read, wait_for  # noqa: E402
from _openwebui import LOOP, OpenWebUI, Tab, load_tool, run  # noqa: E402

try:
    import pydantic  # noqa: F401
except ImportError:  # pragma: no cover
    pydantic = None

print("Open WebUI's loop in these tests: %s" % LOOP, file=sys.stderr)


def _shq(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


@unittest.skipIf(pydantic is None, "pydantic is not installed (apt-get install python3-pydantic): Open WebUI's tools need it")
class QuestionsTest(SpoolCase):
    def setUp(self):
        super().setUp()
        self.mod = load_tool("vm_agent.py")
        self.tool = self.mod.Tools()
        v = self.tool.valves
        v.spool_dir, v.bin_dir = self.spool, BIN
        v.client_path = os.path.join(CLIENT, "vmspool.py")
        self.spoold("--kill-grace", "1s")
        self.page = self.serve()
        v.page_url = self.page  # as printed, with its token: the status must drop it
        self.owui = OpenWebUI()

    def agent(self, script):
        """The agent command: sh running script, the task as $1."""
        self.tool.valves.agent_command = "sh -c %s vm-agent" % _shq(script)

    def assert_last_done(self, call):
        st = call.emitter.statuses()
        self.assertTrue(st and st[-1]["done"], st)
        self.assertFalse(any(s["done"] for s in st[:-1]), st)
        self.assert_routes_visible(call)

    def assert_routes_visible(self, call):
        """Issue 32, 6: every status as Open WebUI draws it (one line, cut
        at 80 characters) says what matters in it, and where to answer an
        open question is whole somewhere the person can read it: the
        quoted line, and the page's address when there is a page. Every
        test checks it (assert_last_done)."""
        for t in call.emitter.texts():
            self.assertLess(len(t), 200, t)
        drawn = call.emitter.drawn()
        asked = [t for t in drawn if t.startswith("Waiting for your answer: ")]
        if not asked:
            return
        shown = call.emitter.shown()
        self.assertTrue(any(re.search(r"spool answer --chat \S+ --question \S+ TEXT", x) for x in shown),
                        "the answer line is nowhere whole: %s" % shown)
        if self.tool.valves.page_url:
            self.assertTrue(any(re.search(r"http://\S+/#chat=\S+", x) for x in shown),
                            "the page's address is nowhere whole: %s" % shown)

    def job_of(self, call):
        for t in call.emitter.texts():
            m = re.match(r"Queued \(job (\S+)\)", t)
            if m:
                return m.group(1)
        self.fail("no job queued: %s" % call.emitter.texts())

    def events(self, job):
        p = os.path.join(self.spool, job + ".events")
        return [json.loads(l) for l in read(p).splitlines() if l.strip()] if os.path.exists(p) else []

    def said_after(self, job, text, at):
        """How long after `at` the job said `text` (None: not yet)."""
        for ev in self.events(job):
            if ev.get("type") == "status" and ev.get("text") == text:
                return ev["at"] - at
        return None

    def answer_doc(self, chat):
        return json.loads(read(os.path.join(self.spool, "chats", chat, "answer.json")))

    def cli_answer(self, chat, text, check=True):
        return self.spool_cmd("answer", "--chat", chat, text, check=check)

    def page_answer(self, chat, question, text):
        """Answer as the live page does: its address carries the token in
        its fragment (#token=T), and the page's script posts the answer from
        its own origin with the token as a header."""
        u = urllib.parse.urlsplit(self.page)
        tok = urllib.parse.parse_qs(u.fragment)["token"][0]
        c = http.client.HTTPConnection(u.netloc, timeout=10)
        c.request("POST", "/chats/%s/answer" % chat, body=json.dumps({"question": question, "answer": text}),
                  headers={"Content-Type": "application/json", "Authorization": "Bearer " + tok,
                           "Origin": "http://" + u.netloc, "Sec-Fetch-Site": "same-origin"})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body

    def question_status(self, call):
        return next(t for t in call.emitter.drawn() if t.startswith("Waiting for your answer: "))

    # Done when: a question whose dialog never returns is answered from
    # the page, and the job continues within a second of the answer. The
    # question's status is one line; a source under the message says where
    # else to answer at once: the page's address for this chat (without
    # the token) and the quoted line.
    def test_never_returning_dialog_answered_from_the_page(self):
        self.agent('a=$(spool ask --options yes,no "Deploy now?") || exit 9; spool say "deploy: $a"')

        async def go():
            tab = Tab("other")  # another chat on screen: the call never returns
            call = self.owui.call(self.tool.vm_agent, "deploy", chat="chat-page", tab=tab)
            await call.until(lambda t: any(x.startswith("Waiting for your answer: ") for x in t),
                             "the question's status")
            self.assertEqual(self.question_status(call), "Waiting for your answer: Deploy now? [yes/no]")
            # Where to answer, under the message, whole: the page for this
            # chat (without the token) and the quoted line.
            (name, docs), = call.emitter.sources()
            self.assertEqual(name, "Where to answer: Deploy now? [yes/no]")
            for want in ("/#chat=chat-page", "`spool answer --chat chat-page --question q"):
                self.assertIn(want, docs[0])
            self.assertNotIn("token", docs[0])
            end = time.monotonic() + 10
            while not tab.calls and time.monotonic() < end:
                await asyncio.sleep(0.02)
            self.assertIn("Cancel answers no", tab.calls[0]["data"]["message"])
            prog = json.loads(read(os.path.join(self.spool, "progress", "chat-page")))
            status, body = await asyncio.to_thread(self.page_answer, "chat-page", prog["question"]["id"], "yes")
            self.assertEqual(status, 200, body)
            return await call.result(), call, tab

        out, call, tab = run(go())
        self.assertIn("deploy: yes", out)
        job = self.job_of(call)
        took = self.said_after(job, "deploy: yes", self.answer_doc("chat-page")["at"])
        self.assertIsNotNone(took)
        self.assertLess(took, 1.0, "the job went on %.2fs after the answer" % took)
        self.assertIn("The question was answered: yes", call.emitter.texts())
        self.assertEqual(len(tab.calls), 1)
        self.assert_last_done(call)

    # Issue 32, 4: three answers at once, from the dialog, the shell and
    # the page, 0, 10, 50 and 500 ms apart (each route first in turn): one
    # wins, and each of the others is told "already answered: X", X the
    # winner's text: a status for the dialog, exit 1 for the shell, a 409
    # for the page. At 500 ms the run has taken the answer and closed its
    # question before the others come. After the run ended, the shell and
    # the page are still told.
    def test_three_answers_at_once(self):
        chat = "chat-race"
        # The run lives a while after its last question: a dialog's
        # answer can be told only while the tool runs.
        self.agent('for i in 1 2 3 4; do a=$(spool ask "Pick $i?") || exit 9; spool say "got $i: $a"; done; sleep 1.5')
        routes = ["dialog", "shell", "page"]

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "race", chat=chat, tab=tab)
            rounds = []
            for n, gap in enumerate((0, 0.01, 0.05, 0.5), 1):
                d = await tab.dialog(n)
                qid = json.loads(read(os.path.join(self.spool, "progress", chat)))["question"]["id"]
                order = routes[n % 3:] + routes[:n % 3]

                async def send(route, n=n, d=d, qid=qid):
                    text = "%s-%d" % (route, n)
                    if route == "dialog":
                        d.type(text)
                        return None
                    if route == "shell":
                        p = await asyncio.to_thread(self.spool_cmd, "answer", "--chat", chat, "--question", qid,
                                                    text, check=False)
                        return p.returncode, p.stderr
                    return await asyncio.to_thread(self.page_answer, chat, qid, text)

                tasks = []
                for i, route in enumerate(order):
                    if i:
                        await asyncio.sleep(gap)
                    tasks.append(asyncio.ensure_future(send(route)))
                got = dict(zip(order, await asyncio.gather(*tasks)))
                job = self.job_of(call)
                end = time.monotonic() + 30
                while not any(e.get("text", "").startswith("got %d: " % n) for e in self.events(job)):
                    self.assertLess(time.monotonic(), end, "round %d: the run did not go on" % n)
                    await asyncio.sleep(0.02)
                won = self.answer_doc(chat)["answer"]
                # The dialog's outcome is its status: taken, or not and why.
                if won != "dialog-%d" % n:
                    await call.until(lambda t, n=n, won=won: "Dialog answer not taken: already answered: %s" % won in t,
                                     "the dialog's loser status, round %d" % n)
                rounds.append((n, gap, order, got, won, qid))
            out = await call.result()
            return out, call, rounds

        out, call, rounds = run(go())
        for n, gap, order, got, won, _ in rounds:
            what = "round %d (%d ms apart, %s first): %s won; %s" % (n, gap * 1000, order[0], won, got)
            self.assertIn(won, ("dialog-%d" % n, "shell-%d" % n, "page-%d" % n), what)
            winners = [r for r in routes if r == won.split("-")[0]]
            self.assertEqual(len(winners), 1, what)
            if gap >= 0.5:
                self.assertEqual(won, "%s-%d" % (order[0], n), what)
            shell_rc, shell_err = got["shell"]
            page_code, page_body = got["page"]
            if won.startswith("shell"):
                self.assertEqual(shell_rc, 0, what)
            else:
                self.assertEqual(shell_rc, 1, what)
                self.assertIn("already answered: %s" % won, shell_err, what)
            if won.startswith("page"):
                self.assertEqual(page_code, 200, what)
            else:
                self.assertEqual(page_code, 409, what)
                self.assertIn("already answered: %s" % won, page_body, what)
            said = [e.get("text") for e in self.events(self.job_of(call)) if e.get("type") == "status"]
            self.assertIn("got %d: %s" % (n, won), said, what)
        # After the run ended: still told, not "no question is open".
        won, qid = rounds[-1][4], rounds[-1][5]
        doc = json.loads(read(os.path.join(self.spool, "progress", chat)))
        self.assertTrue(doc["done"], doc)
        p = self.spool_cmd("answer", "--chat", chat, "--question", qid, "late", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("question %s: already answered: %s" % (qid, won), p.stderr)
        status, body = self.page_answer(chat, qid, "late")
        self.assertEqual(status, 409, body)
        self.assertIn("already answered: %s" % won, body)
        self.assert_last_done(call)

    # Issue 32, 1: a status is drawn on one line. A 4,000-character
    # question gives statuses under 200 characters, whose first 80 say
    # that the run waits for the person, and the question's start, cut
    # with "…"; the page shows it whole, the dialog its first 1,000
    # characters; where to answer is whole under the message.
    def test_long_question_in_one_line(self):
        chat = "chat-long"
        self.agent('q="Deploy $(head -c 3980 /dev/zero | tr "\\0" w) END?"; '
                   'a=$(spool ask "$q") || exit 9; spool say "got: $a"')
        self.tool.valves.status_every = 0

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "long", chat=chat, tab=tab)
            d = await tab.dialog()
            # The dialog's title shows its first 1,000 characters (more
            # would push the buttons off the screen) and says where it is
            # whole: the page.
            self.assertTrue(d.message.startswith("Deploy www"), d.message[:100])
            self.assertEqual(len(d.data["title"]), 1000)
            self.assertIn("read it whole on the live page", d.data["message"])
            doc = json.loads(read(os.path.join(self.spool, "progress", chat)))
            self.assertTrue(doc["question"]["text"].endswith("w END?"))
            d.type("yes")
            return await call.result(), call

        out, call = run(go())
        self.assertIn("got: yes", out)
        for t in call.emitter.texts():
            self.assertLess(len(t), 200, t)
        q = self.question_status(call)
        self.assertTrue(q.startswith("Waiting for your answer: Deploy www"), q)
        self.assertTrue(q.endswith("…"), q)
        self.assertLessEqual(len(q), 80)
        for name, _ in call.emitter.sources():
            self.assertLessEqual(len(name), 80, name)
        self.assert_last_done(call)

    # Issue 32, 6: the harness draws a status as Open WebUI does, and a
    # test whose answer route shows only past the cut fails: a question's
    # status as the tools wrote it before (the routes at about character
    # 70 and 175, on one line) is caught.
    def test_harness_fails_a_route_past_the_cut(self):
        from _openwebui import Emitter, drawn

        class Shown:
            emitter = Emitter()

        old = ("Question: Deploy now? [yes/no]. Answer it in the dialog (Cancel answers no), or on the live "
               "page http://127.0.0.1:8377/#chat=c1, or on the host with `spool answer --chat c1 --question q1 "
               "TEXT`. Closing the dialog leaves it open.")
        self.assertEqual(drawn(old), old[:79] + "…")
        self.assertEqual(drawn("a\nb   c"), "a b c")
        for desc in ("Waiting for your answer: Deploy now? [yes/no]", "Waiting for your answer: " + old):
            Shown.emitter.events = [{"type": "status", "data": {"description": desc, "done": True}}]
            with self.assertRaises(AssertionError):
                self.assert_routes_visible(Shown)
        # The same words under the message, whole: seen.
        Shown.emitter.events = [{"type": "status", "data": {"description": "Waiting for your answer: Deploy now?",
                                                            "done": True}}]
        Shown.emitter.events.append({"type": "source", "data": {
            "source": {"name": "Where to answer", "id": "x"}, "document": [old], "metadata": [{"source": "x"}]}})
        self.assert_routes_visible(Shown)

    # Issue 32, 5: the dialog as it behaves. A click on its backdrop
    # closes it and sends nothing, as Escape does: the question stays open
    # and is answered elsewhere. Enter confirms: a confirmation's OK; an
    # input's text even when empty, which a question that needs a word
    # refuses, so it is asked again, saying why.
    def test_backdrop_and_enter(self):
        self.agent('a=$(spool ask "Which tag?") || exit 9; b=$(spool ask --options yes,no "Push $a?") || exit 9; '
                   'c=$(spool ask "Note?") || exit 9; spool say "tag $a push $b note $c"')

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "tag", chat="chat-keys", tab=tab)
            d1 = await tab.dialog(1)
            d1.enter()  # nothing typed: an empty answer, refused, asked again
            d2 = await tab.dialog(2)
            self.assertEqual(d2.kind, "input")
            self.assertIn("Which tag?", d2.message)
            self.assertIn("Not taken: an empty answer is not taken", d2.message)
            d2.type("v2")
            d3 = await tab.dialog(3)
            self.assertEqual(d3.kind, "confirmation")
            d3.enter()  # OK: yes
            d4 = await tab.dialog(4)
            d4.backdrop()  # closed, nothing sent: the question stays open
            await asyncio.sleep(0.3)
            self.assertIn("Note", json.loads(read(os.path.join(self.spool, "progress", "chat-keys")))["question"]["text"])
            p = await asyncio.to_thread(self.cli_answer, "chat-keys", "from the shell")
            self.assertEqual(p.returncode, 0, p.stderr)
            return await call.result(), call, d4

        out, call, d4 = run(go())
        self.assertIn("tag v2 push yes note from the shell", out)
        self.assertTrue(d4.gone)
        self.assert_last_done(call)

    # Done when: ... and from the CLI. Here the person pressed Escape:
    # the dialog closed and sent nothing; the status had said that this
    # leaves the question open, and the tool stops waiting on the dialog
    # once the answer comes.
    def test_escape_then_answered_from_the_cli(self):
        self.agent('a=$(spool ask "Which branch?") || exit 9; spool say "branch: $a"')

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "build", chat="chat-cli", tab=tab)
            d = await tab.dialog()
            self.assertEqual(d.kind, "input")
            d.escape()
            self.assertIn("closing it leaves the question open", call.emitter.sources()[0][1][0])
            p = await asyncio.to_thread(self.cli_answer, "chat-cli", "main")
            self.assertEqual(p.returncode, 0, p.stderr)
            out = await call.result()
            return out, call, d

        out, call, d = run(go())
        self.assertIn("branch: main", out)
        self.assertTrue(d.gone, "the tool still waits on the dialog")
        took = self.said_after(self.job_of(call), "branch: main", self.answer_doc("chat-cli")["at"])
        self.assertLess(took, 1.0)
        self.assertIn("The question was answered: main", call.emitter.texts())
        self.assert_last_done(call)

    # Done when: a yes/no Cancel reaches the job as "no".
    def test_yes_no_cancel_is_no(self):
        self.agent('a=$(spool ask --options yes,no "Delete the old builds?") || exit 9; spool say "got $a"')

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "clean", chat="chat-cancel", tab=tab)
            d = await tab.dialog()
            self.assertEqual(d.kind, "confirmation")
            self.assertIn("Cancel answers no", d.message)
            d.cancel()
            return await call.result(), call

        out, call = run(go())
        self.assertIn("got no", out)
        self.assert_last_done(call)

    # Done when: an options question answered with a non-option is asked
    # again. Open WebUI 0.10 shows a select list (which cannot give one);
    # an older one shows a text field, whose answer spool answer checks.
    def test_options_select_and_asked_again(self):
        self.agent('a=$(spool ask --options red,green,blue "Which colour?") || exit 9; spool say "colour: $a"\n'
                   'b=$(spool ask --options small,large "Which size?") || exit 8; spool say "size: $b"')

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "paint", chat="chat-opts", tab=tab)
            d = await tab.dialog(1)
            self.assertEqual(d.select, ["red", "green", "blue"])
            d.type("purple")  # an Open WebUI without select lists
            d2 = await tab.dialog(2)
            self.assertIn("not one of its options", d2.message)
            d2.type("Green")
            d3 = await tab.dialog(3)
            self.assertIn("Which size?", d3.message)
            d3.choose("large")
            return await call.result(), call

        out, call = run(go())
        self.assertIn("colour: green", out)
        self.assertIn("size: large", out)
        self.assert_last_done(call)

    # An empty answer answers only a question that allows it: else the
    # dialog asks again, saying why.
    def test_empty_answer_only_where_allowed(self):
        self.agent('a=$(spool ask "Commit message?") || exit 9; spool say "msg: [$a]"\n'
                   'b=$(spool ask --allow-empty "Extra flags?") || exit 8; spool say "flags: [$b]"')

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "commit", chat="chat-empty", tab=tab)
            d = await tab.dialog(1)
            d.type("")
            d2 = await tab.dialog(2)
            self.assertIn("empty answer is not taken", d2.message)
            d2.type("fix the build")
            d3 = await tab.dialog(3)
            self.assertIn("An empty answer is an answer here", d3.message)
            d3.type("")
            return await call.result(), call

        out, call = run(go())
        self.assertIn("msg: [fix the build]", out)
        self.assertIn("flags: []", out)
        self.assert_last_done(call)

    # The tab closed before the dialog: the call returns the error at once,
    # and the status says the question is still open; the source under the
    # message says where else to answer.
    def test_tab_closed_before_the_dialog(self):
        self.agent('a=$(spool ask --options yes,no "Go on?") || exit 9; spool say "go: $a"')

        async def go():
            tab = Tab("closed")
            call = self.owui.call(self.tool.vm_agent, "go", chat="chat-closed", tab=tab)
            await call.until(lambda t: any("Client session disconnected" in x for x in t), "the dialog's failure")
            said = [t for t in call.emitter.drawn() if "Still waiting" in t][0]
            self.assertEqual(said, "Still waiting for your answer (no dialog): Go on? [yes/no] (Client session disc…")
            self.assertTrue(call.emitter.visible("#chat=chat-closed"))
            self.assertTrue(call.emitter.visible("spool answer --chat chat-closed --question"))
            p = await asyncio.to_thread(self.cli_answer, "chat-closed", "yes")
            self.assertEqual(p.returncode, 0, p.stderr)
            return await call.result(), call

        out, call = run(go())
        self.assertIn("go: yes", out)
        self.assert_last_done(call)

    # The tab closed while the dialog is open: the call never returns; the
    # page answers, and the tool lets the dialog go.
    def test_tab_closed_during_the_dialog(self):
        self.agent('a=$(spool ask --options yes,no "Go on?") || exit 9; spool say "go: $a"')

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "go", chat="chat-gone", tab=tab)
            d = await tab.dialog()
            tab.close()
            prog = json.loads(read(os.path.join(self.spool, "progress", "chat-gone")))
            status, body = await asyncio.to_thread(self.page_answer, "chat-gone", prog["question"]["id"], "no")
            self.assertEqual(status, 200, body)
            return await call.result(), call, d

        out, call, d = run(go())
        self.assertIn("go: no", out)
        self.assertTrue(d.gone)
        self.assert_last_done(call)

    # A dialog's timeout (WEBSOCKET_EVENT_CALLER_TIMEOUT set): raised by
    # python-socketio in 0.10.x, returned as {"error"} in others.
    def test_dialog_timeout(self):
        for style in ("raise", "dict"):
            with self.subTest(style=style):
                chat = "chat-timeout-" + style
                self.agent('a=$(spool ask "Name?") || exit 9; spool say "name: $a"')

                async def go():
                    tab = Tab(timeout=0.2, timeout_style=style)
                    call = self.owui.call(self.tool.vm_agent, "x", chat=chat, tab=tab)
                    await call.until(lambda t: any("Still waiting" in x for x in t), "the timeout's status")
                    p = await asyncio.to_thread(self.cli_answer, chat, "vm1")
                    self.assertEqual(p.returncode, 0, p.stderr)
                    return await call.result(), call

                out, call = run(go())
                self.assertIn("name: vm1", out)
                self.assert_last_done(call)

    # Done when: the stop button returns in under a second with a job
    # that ignores SIGTERM; here during a dialog. The kill grace runs in
    # spoold (1 s here), not in the tool.
    def test_stop_during_a_dialog(self):
        self.agent("trap '' TERM; a=$(spool ask --options yes,no 'Proceed?'); spool say \"got $a\"; "
                   "while :; do sleep 0.2; done")

        async def go():
            tab = Tab()
            call = self.owui.call(self.tool.vm_agent, "long", chat="chat-stop", tab=tab)
            d = await tab.dialog()
            took = await call.stop()
            return call, d, took

        call, d, took = run(go())
        # The bound: the stop awaits nothing of the job's end.
        self.assertLess(took, 1.0, "the stop held Open WebUI's task %.2fs" % took)
        self.assertTrue(d.gone)
        last = call.emitter.texts()[-1]
        self.assertIn("cancel", last)
        self.assert_last_done(call)
        job = self.job_of(call)
        wait_for("the job's end by spoold", lambda: json.loads(self.spool_cmd("show", "--json", job).stdout)["state"] == "cancelled")

    # Done when: a temporary chat and an API call each run the seed story:
    # run 1, run 2 in the same chat, no stale progress or answer.
    def test_temporary_chat_and_api_call_run_the_story(self):
        self.agent('spool say "working on: $1"; a=$(spool ask --options yes,no "Ship $1?") || exit 9; '
                   'spool say "ship $1: $a"')
        for kind in ("temporary", "api"):
            with self.subTest(kind=kind):
                tab = Tab()

                async def story():
                    outs = []
                    for task, reply in (("the app", "yes"), ("the fix", "no")):
                        c = self.owui.call(self.tool.vm_agent, task, tab=tab,
                                           temporary=kind == "temporary", api=kind == "api")
                        if kind == "temporary":
                            d = await tab.dialog(len(tab.dialogs) + 1)
                            self.assertIn("Ship %s?" % task, d.message)
                            (d.ok if reply == "yes" else d.cancel)()
                        else:
                            await c.until(lambda t: any("Still waiting" in x for x in t), "the API call's question")
                            p = await asyncio.to_thread(self.cli_answer, chat_of(c), reply)
                            self.assertEqual(p.returncode, 0, p.stderr)
                        outs.append((await c.result(), c))
                    return outs

                def chat_of(c):
                    line = [t for t in c.emitter.shown() if "spool answer --chat " in t][0]
                    return line.split("spool answer --chat ", 1)[1].split()[0]

                (out1, c1), (out2, c2) = run(story())
                chat = chat_of(c2)
                want = "local-" + tab.sid if kind == "temporary" else "api-" + self.owui.user["id"]
                self.assertEqual(chat, want)
                self.assertEqual(chat_of(c1), chat, "the same chat keeps its id")
                self.assertIn("ship the app: yes", out1)
                self.assertIn("ship the fix: no", out2)
                job2 = self.job_of(c2)
                texts2 = c2.emitter.texts()
                after = texts2[texts2.index("Queued (job %s)" % job2) + 1:]
                for t in after:
                    self.assertNotIn("the app", t)
                self.assertIn(job2, out2)
                self.assert_last_done(c1)
                self.assert_last_done(c2)

    # The person comes back: a run waits on a question whose dialog is
    # gone (the tab was closed); a new call of vm_agent in that chat asks
    # it again, starts no second run, and clears nothing of the first.
    def test_coming_back_asks_again(self):
        self.agent('a=$(spool ask --options yes,no "Migrate the database?") || exit 9; spool say "migrate: $a"')

        async def go():
            tab1 = Tab()
            first = self.owui.call(self.tool.vm_agent, "migrate", chat="chat-back", tab=tab1)
            await tab1.dialog()
            tab1.close()
            jobs_before = set(os.listdir(self.spool))
            tab2 = Tab()
            again = self.owui.call(self.tool.vm_agent, "something else", chat="chat-back", tab=tab2)
            d = await tab2.dialog()
            self.assertIn("Migrate the database?", d.message)
            new = [n for n in set(os.listdir(self.spool)) - jobs_before if n.endswith(".json")]
            self.assertEqual(new, [], "a second run was submitted")
            d.ok()
            return await first.result(), await again.result(), first, again

        out1, out2, first, again = run(go())
        self.assertIn("migrate: yes", out1)
        self.assertIn("migrate: yes", out2)
        self.assertIn("was not started", out2)
        self.assertIn("The question was answered: yes", first.emitter.texts())
        self.assert_last_done(first)
        self.assert_last_done(again)

    # Every sentence after a refusal names the one commit tool, the gate's
    # own text included.
    def test_commit_tool_is_one_name(self):
        self.tool.valves.commit_tool = "host_commit"
        self.tool.valves.agent_script = 'cd /tmp && git add -A && git commit -m "$VMSPOOL_TASK"'

        async def go():
            c = self.owui.call(self.tool.vm_agent, "my change", chat="chat-commit")
            return await c.result(), c

        out, c = run(go())
        self.assertIn("vmgate refused", out)
        self.assertIn("host_commit", out)
        self.assertNotIn("git_commit", out)
        for t in c.emitter.texts():
            self.assertNotIn("git_commit", t)
        self.assert_last_done(c)
        self.tool.valves.commit_tool = "x`y`"

        async def bad():
            c = self.owui.call(self.tool.vm_agent, "my change", chat="chat-commit")
            return await c.result(), c

        out, c = run(bad())
        self.assertIn("No run was started", out)
        self.assert_last_done(c)


@unittest.skipIf(pydantic is None, "pydantic is not installed (apt-get install python3-pydantic): Open WebUI's tools need it")
class ProgressQuestionsTest(SpoolCase):
    def setUp(self):
        super().setUp()
        self.tool = load_tool("vm_agent_progress.py").Tools()
        v = self.tool.valves
        v.spool_dir, v.bin_dir = self.spool, BIN
        v.client_path = os.path.join(CLIENT, "vmspool.py")
        self.spoold()
        self.owui = OpenWebUI()

    # vm_progress with nothing running waits its valve's time for a run,
    # then says nothing is running, and returns.
    def test_nothing_running(self):
        self.tool.valves.wait_for_run = 1.0

        async def go():
            c = self.owui.call(self.tool.vm_progress, chat="chat-idle")
            began = time.monotonic()
            out = await c.result(30)
            return out, c, time.monotonic() - began

        out, c, took = run(go())
        self.assertIn("No run is going", out)
        self.assertGreaterEqual(took, 1.0)
        self.assertTrue(c.emitter.statuses()[-1]["done"])

    # ... and follows a run that starts while it waits.
    def test_run_starting_while_waiting(self):
        sys.path.insert(0, CLIENT)
        import vmspool

        async def go():
            c = self.owui.call(self.tool.vm_progress, chat="chat-late")
            # The follower is up (its start stamp taken) before the run: the
            # case under test.
            await asyncio.to_thread(wait_for, "the tool's watchd follow", lambda: follower_watching("chat-late"))
            await asyncio.to_thread(vmspool.submit, "chat-late", argv=["sh", "-c", "spool say late-run"], spool=self.spool)
            return await c.result(60), c

        out, c = run(go())
        self.assertIn("ended: done", out)
        self.assertIn("late-run", c.emitter.texts())

    # Coming back through vm_progress: the waiting run's question is asked
    # again at once.
    def test_coming_back_asks_again(self):
        sys.path.insert(0, CLIENT)
        import vmspool
        job = vmspool.submit("chat-pback", argv=["sh", "-c", 'a=$(spool ask "Tag?") || exit 9; spool say "tag: $a"'],
                             spool=self.spool)
        prog = os.path.join(self.spool, "progress", "chat-pback")
        wait_for("the question", lambda: os.path.exists(prog) and '"question":{' in read(prog))

        async def go():
            tab = Tab()
            c = self.owui.call(self.tool.vm_progress, chat="chat-pback", tab=tab)
            d = await tab.dialog()
            self.assertIn("Tag?", d.message)
            d.type("v1.2")
            return await c.result(60), c

        out, c = run(go())
        self.assertIn("ended: done", out)
        self.assertIn(job, out)
        self.assertIn("The question was answered: v1.2", c.emitter.texts())
        self.assertTrue(c.emitter.statuses()[-1]["done"])


if __name__ == "__main__":
    unittest.main()
