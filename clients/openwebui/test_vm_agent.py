"""The Open WebUI tools, called as Open WebUI calls them (docs/clients.md,
"The Open WebUI tools", says how): the file imported as Open WebUI
imports a pasted tool, its Valves set, vm_agent awaited with the reserved
arguments filled, an emitter that records every event, and an event-call
stub that answers, cancels, reports a closed tab, raises a timeout or
never returns. Real spoold and watchd run on a spool of the test's own.
"""

import asyncio
import json
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "python")
sys.path.insert(0, CLIENT)

from _testing import BIN, SpoolCase, follower_watching, read, wait_for  # noqa: E402
from _openwebui import Emitter, SocketTimeout, load_tool  # noqa: E402

try:
    import pydantic  # noqa: F401
except ImportError:  # pragma: no cover
    pydantic = None


class Caller:
    """__event_call__: one behaviour for every dialog."""

    def __init__(self, mode, value=None):
        self.mode, self.value, self.calls = mode, value, []

    async def __call__(self, ev):
        self.calls.append(ev)
        if self.mode == "reply":
            return self.value
        if self.mode == "closed":
            return {"error": "Client session disconnected."}
        if self.mode == "timeout-dict":
            return {"error": "Event call timed out after 300 seconds"}
        if self.mode == "timeout-raise":
            raise SocketTimeout("Timeout")
        if self.mode == "cancel":
            return False
        if self.mode == "never":
            await asyncio.Future()
        raise AssertionError(self.mode)


@unittest.skipIf(pydantic is None, "pydantic is not installed (apt-get install python3-pydantic): Open WebUI's tools need it")
class VMAgentTest(SpoolCase):
    def setUp(self):
        super().setUp()
        self.mod = load_tool("vm_agent.py")
        self.tool = self.mod.Tools()
        v = self.tool.valves
        v.spool_dir = self.spool
        v.bin_dir = BIN
        v.client_path = os.path.join(CLIENT, "vmspool.py")
        self.spoold()

    def agent(self, script):
        """The agent command: sh running script, the task as $1."""
        self.tool.valves.agent_command = "sh -c %s vm-agent" % _shq(script)

    def call(self, task, chat="chat-1", emitter=None, caller=None):
        emitter = emitter or Emitter()
        meta = {"user_id": "u1", "chat_id": chat, "message_id": "m1", "session_id": "s1"}
        coro = self.tool.vm_agent(task, __user__={"id": "u1", "name": "A", "role": "user", "valves": {}},
                                  __metadata__=meta, __chat_id__=chat, __event_emitter__=emitter,
                                  __event_call__=caller)
        return coro, emitter

    def run_call(self, task, **kw):
        coro, emitter = self.call(task, **kw)
        out = asyncio.run(asyncio.wait_for(coro, 120))
        return out, emitter

    def assert_last_done(self, emitter):
        st = emitter.statuses()
        self.assertTrue(st and st[-1]["done"], st)
        self.assertFalse(any(s["done"] for s in st[:-1]), st)

    def job_of(self, emitter):
        for t in emitter.texts():
            m = re.match(r"Queued \(job (\S+)\)", t)
            if m:
                return m.group(1)
        self.fail("no job queued: %s" % emitter.texts())

    # The original story: run 1 ends done; run 2 in the same chat is
    # relayed to its own end, and its first statuses are its own.
    def test_second_run_in_the_same_chat(self):
        self.agent('spool say "building: $1"; sleep 0.3; spool say "app ready"')
        out1, em1 = self.run_call("an app")
        self.assertIn("ended: done", out1)
        self.assert_last_done(em1)
        self.agent('sleep 1.5; spool say "fixing: $1"; sleep 0.3; spool say "fix ready"; exit 0')
        out2, em2 = self.run_call("the fix")
        texts = em2.texts()
        self.assertIn("ended: done", out2)
        self.assertIn("fix ready", out2)
        self.assert_last_done(em2)
        job2 = self.job_of(em2)
        after_queued = texts[texts.index("Queued (job %s)" % job2) + 1:]
        self.assertTrue(after_queued, texts)
        for t in after_queued:
            self.assertNotIn("app ready", t)
            self.assertNotIn("building", t)
        self.assertTrue(any("fixing: the fix" in t for t in after_queued), texts)
        # The relay's end is run 2's own: its job, not run 1's.
        self.assertIn(job2, out2)

    def test_question_opens_the_right_dialog(self):
        self.agent('a=$(spool ask --options yes,no "Deploy now?") && spool say "got $a"\n'
                   'b=$(spool ask --options red,green,blue "Which colour?") && spool say "got $b"')
        answers = iter([True, "green"])

        class Both(Caller):
            async def __call__(self, ev):
                self.calls.append(ev)
                return next(answers)

        caller = Both("reply")
        out, em = self.run_call("deploy", caller=caller)
        self.assertEqual([c["type"] for c in caller.calls], ["confirmation", "input"])
        self.assertTrue(caller.calls[0]["data"]["title"].startswith("Deploy now?"))
        self.assertIn("Cancel answers no", caller.calls[0]["data"]["message"])
        self.assertIn("Which colour?", caller.calls[1]["data"]["title"])
        self.assertIn("red / green / blue", caller.calls[1]["data"]["title"])
        self.assertIn("got yes", out)
        self.assertIn("got green", out)
        self.assert_last_done(em)

    # Each dialog's failure (a closed tab, a timeout, Escape, another chat
    # on screen) is played in test_questions.py, with _openwebui.Tab.

    def test_many_statuses_are_throttled(self):
        self.agent('i=0; while [ $i -lt 200 ]; do i=$((i+1)); spool say "step $i"; sleep 0.01; done')
        began = time.monotonic()
        out, em = self.run_call("count")
        took = time.monotonic() - began
        steps = [int(t.split()[1]) for t in em.texts() if re.fullmatch(r"step \d+", t)]
        self.assertTrue(steps, em.texts())
        self.assertEqual(steps, sorted(steps))
        # 200 statuses over two seconds or more (longer on a busy
        # machine): about one a second reaches the chat (the newest
        # winning), never the 200.
        self.assertLessEqual(len(steps), int(took) + 6, (took, steps))
        self.assertIn("step 200", out)
        self.assert_last_done(em)

    def test_stop_button_cancels_the_job(self):
        self.agent('spool say working; sleep 60')

        async def go():
            coro, em = self.call("long", chat="chat-stop")
            task = asyncio.ensure_future(coro)
            while "working" not in em.texts():
                await asyncio.sleep(0.02)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            return em

        em = asyncio.run(go())
        self.assert_last_done(em)
        self.assertIn("the cancel of run", em.texts()[-1])
        job = self.job_of(em)
        # The tool asked for the cancel and returned; spoold ends the job.
        wait_for("the job's cancel", lambda: json.loads(self.spool_cmd("show", "--json", job).stdout)["state"] == "cancelled")
        # The chat's next call starts a new run, guarded as any second run.
        self.agent('spool say "next one"')
        out, em2 = self.run_call("again", chat="chat-stop")
        self.assertIn("ended: done", out)
        self.assertIn("next one", em2.texts())

    def test_gate_refusal_names_the_commit_tool(self):
        self.tool.valves.agent_script = 'cd /tmp && git add -A && git commit -m "$VMSPOOL_TASK"'
        out, em = self.run_call("my change")
        self.assertIn("ended: failed", out)
        self.assertIn("vmgate refused", out)
        self.assertIn("git_commit", out)
        self.assertTrue(any("vmgate refused" in t for t in em.texts()), em.texts())
        self.assert_last_done(em)

    def test_task_is_data_in_agent_script(self):
        # Second review, 3: {task} was replaced by the task shell-quoted,
        # but inside double quotes or an unquoted here-document the quotes
        # are literal, and the model's $(...) ran as the spool's user. The
        # script now reads the task from $VMSPOOL_TASK and {task} is refused.
        pasted = os.path.join(self.tmp, "pasted")
        out_file = os.path.join(self.tmp, "task-seen")
        task = "$(touch %s) `touch %s` it's \"quoted\" ${HOME} *" % (pasted, pasted)
        for script in ('echo "{task}" > %s' % out_file, "cat > %s <<EOF\n{task}\nEOF" % out_file):
            with self.subTest(script=script):
                self.tool.valves.agent_script = script
                out, em = self.run_call(task, chat="chat-script")
                self.assertFalse(os.path.exists(pasted), "the task ran as shell code: %s" % out)
                self.assertIn("{task}", out)
                self.assertIn("VMSPOOL_TASK", out)
                self.assert_last_done(em)
        self.tool.valves.agent_script = 'printf %%s "$VMSPOOL_TASK" > %s; spool say "task read"' % out_file
        out, em = self.run_call(task, chat="chat-script")
        self.assertIn("ended: done", out)
        self.assertEqual(read(out_file), task)
        self.assertFalse(os.path.exists(pasted))

    def test_task_is_one_argument(self):
        # The task is the agent's last argument, alone: one that starts
        # with a dash is not handed to an agent that would read it as an
        # option, unless agent_command ends with "--".
        seen = os.path.join(self.tmp, "argv")
        self.agent('printf "%%s\\n" "$@" > %s' % seen)
        out, em = self.run_call("--output=/etc/passwd fix it", chat="chat-dash")
        self.assertIn("--", out)
        self.assertFalse(os.path.exists(seen), out)
        self.assert_last_done(em)
        self.tool.valves.agent_command += " --"
        out, em = self.run_call("--output=/etc/passwd fix it", chat="chat-dash")
        self.assertIn("ended: done", out)
        self.assertEqual(read(seen), "--\n--output=/etc/passwd fix it\n")
        out, em = self.run_call("two words; $(x)", chat="chat-dash")
        self.assertEqual(read(seen), "--\ntwo words; $(x)\n")

    def test_watch_url(self):
        # watchd serve instead of watchd follow: its socket, and the
        # address it printed, with its token.
        page = self.serve()
        for url in ("unix:" + os.path.join(self.spool, "watchd", "serve.sock"), page):
            with self.subTest(url=url.split("?")[0]):
                self.tool.valves.watch_url = url
                self.agent('spool say "via serve"; sleep 0.2; spool say "served"')
                out, em = self.run_call("watch", chat="chat-url")
                self.assertIn("ended: done", out)
                self.assertIn("served", out)
                self.assert_last_done(em)

    def test_chat_id_that_is_no_id(self):
        # A chat id the spool's rule refuses runs under an id derived from
        # it, never a refusal (temporary chats and API calls: test_questions.py).
        self.agent('spool say "ran in $SPOOL_CHAT"')
        out, em = self.run_call("x", chat="not a valid id")
        self.assertIn("ended: done", out)
        self.assertRegex(out, r"ran in chat_[0-9a-f]{32}")
        self.assert_last_done(em)


@unittest.skipIf(pydantic is None, "pydantic is not installed (apt-get install python3-pydantic): Open WebUI's tools need it")
class VMProgressTest(SpoolCase):
    # The old progress function's role: the installation's own code
    # submits; the tool follows the chat's current run to its end.
    def test_follows_the_current_run(self):
        mod = load_tool("vm_agent_progress.py")
        tool = mod.Tools()
        tool.valves.spool_dir, tool.valves.bin_dir = self.spool, BIN
        tool.valves.client_path = os.path.join(CLIENT, "vmspool.py")
        self.spoold()
        sys.path.insert(0, CLIENT)
        import vmspool
        old = vmspool.submit("c9", argv=["sh", "-c", "spool say first-run"], spool=self.spool)
        # Run 1's last progress is flushed after its result: a watcher
        # without a job id started in between would take that flush (newer
        # than itself) for the chat's run. The tool starts after it.
        prog = os.path.join(self.spool, "progress", "c9")
        wait_for("run 1's last progress", lambda: os.path.exists(prog) and '"done":true' in read(prog))
        # The stamp guard accepts a document up to 10 ms older than the
        # watcher (the rounding of "updated"): the tool starts past that.
        # The sleep is the point: the clock separation the guard judges.
        time.sleep(0.05)

        async def go():
            em = Emitter()
            task = asyncio.ensure_future(tool.vm_progress(__metadata__={"chat_id": "c9"}, __event_emitter__=em))
            # The watcher is up (its start stamp taken) before the run.
            await asyncio.to_thread(wait_for, "the tool's watchd follow", lambda: follower_watching("c9"))
            await asyncio.to_thread(vmspool.submit, "c9", argv=["sh", "-c", "sleep 0.5; spool say second-run"], spool=self.spool)
            return await asyncio.wait_for(task, 60), em

        out, em = asyncio.run(go())
        self.assertIn("ended: done", out)
        self.assertIn("second-run", em.texts())
        self.assertNotIn("first-run", em.texts())
        self.assertTrue(em.statuses()[-1]["done"])


def _shq(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


if __name__ == "__main__":
    unittest.main()
