"""
title: VM agent (vmspool)
description: Runs a long agent job in a VM through vmspool, relays its progress into the chat, asks you its questions, and reports how it ended.
requirements:
version: 1.0.0
license: MIT
"""

# Paste this file into Open WebUI (Workspace > Tools > +). It needs
# vmspool's binaries (spool, watchd) and its Python client (vmspool.py)
# where Open WebUI runs: the Valves say where. README.md, "With Open
# WebUI", has the whole install, the container case included.

import asyncio
import importlib.util
import os
import re
import shlex
import sys

from pydantic import BaseModel, Field


def _client(path):
    """The vmspool client: an importable module, else the file at path."""
    if "vmspool" in sys.modules:
        return sys.modules["vmspool"]
    try:
        import vmspool  # noqa: F401
        return sys.modules["vmspool"]
    except ImportError:
        pass
    if not path or not os.path.isfile(path):
        raise RuntimeError("the vmspool client is not installed: set the client_path valve to vmspool.py (README, \"With Open WebUI\")")
    spec = importlib.util.spec_from_file_location("vmspool", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["vmspool"] = mod
    return mod


class Tools:
    class Valves(BaseModel):
        spool_dir: str = Field(default="/var/spool/vm", description="The spool directory (bind-mounted into the container as on the host).")
        bin_dir: str = Field(default="/usr/local/bin", description="Where vmspool's binaries (spool, watchd) are.")
        client_path: str = Field(default="/usr/local/lib/vmspool/vmspool.py", description="vmspool's Python client, if it is not importable.")
        agent_command: str = Field(default="vm-agent", description="The agent's command, split as a shell would split it (its words, never run by a shell). The task is added as one argument, the last, and is also in $VMSPOOL_TASK. If the agent reads options, end this with -- (\"vm-agent --\"); without it a task that starts with - is refused.")
        agent_script: str = Field(default="", description="Instead of agent_command: a bash script run for the task. The task is never put into the script's text: the script reads it from \"$VMSPOOL_TASK\" (quote it). A script holding the old {task} placeholder is refused. The gate decides the script first.")
        timeout: str = Field(default="2h", description="The job's timeout (Go duration text).")
        status_every: float = Field(default=1.0, description="At most one status per this many seconds (the newest wins).")
        commit_tool: str = Field(default="git_commit", description="The host-side commit tool the agent is sent to when the gate refuses a git write: every refusal names it, the gate's own text included (it goes to the job as VMSPOOL_COMMIT_TOOL). A tool's name: a letter or _, then letters, digits, _ . -.")
        watch_url: str = Field(default="", description="Read progress from watchd serve instead of running watchd follow: its unix socket, unix:/var/spool/vm/watchd/serve.sock (no token: the socket's mode decides), or the http address it printed, http://127.0.0.1:8377/?token=T (without ?token= the token is read from spool_dir's watchd/token, or $WATCHD_TOKEN).")
        page_url: str = Field(default="", description="The live page of watchd serve as people open it (http://127.0.0.1:8377/, or a proxy's https address): a question's source under the message names <page_url>#chat=<chat>, where the person answers when the dialog is gone. Empty: it names only the spool answer line.")

    def __init__(self):
        self.valves = self.Valves()

    async def vm_agent(
        self,
        task: str,
        __user__: dict = None,
        __metadata__: dict = None,
        __chat_id__: str = None,
        __event_emitter__=None,
        __event_call__=None,
    ) -> str:
        """
        Run a long task in a virtual machine: build an app, fix a bug, run a
        test suite. The run's progress shows in the chat as it happens; it
        may ask the person questions (answer them in the dialog, on the live
        page, or with spool answer). Returns how the run ended: its state,
        exit status, error and last statuses. Commits are not made in the
        machine: use the commit tool afterwards.
        :param task: What the agent should do, in plain words.
        """
        v = self.valves

        async def emit(ev):
            if __event_emitter__ is not None:
                await __event_emitter__(ev)

        async def done(text):
            await emit({"type": "status", "data": {"description": text, "done": True, "hidden": False}})

        try:
            vs = _client(v.client_path)
        except Exception as e:
            await done("vmspool is not installed: %s" % e)
            return "The VM agent is not available: %s" % e
        # A temporary chat ("local:<socket id>") and an API call (no chat
        # id) get an id of their own, never a refusal (docs/clients.md).
        chat = vs.openwebui_chat(__metadata__, __chat_id__, __user__)
        tool = v.commit_tool.strip()
        if not _tool_name(tool):
            await done("No run was started: the commit_tool valve %r is not a tool's name." % tool)
            return ("No run was started: the commit_tool valve %r is not a tool's name (a letter or _, then "
                    "letters, digits, _ . -)." % tool)
        bin_dir = v.bin_dir or None
        url = v.watch_url or None
        follow = dict(every=v.status_every, spool=v.spool_dir, bin_dir=bin_dir, url=url, page=v.page_url or None)
        # A run of this chat still waiting for an answer is not replaced:
        # its question is asked again and it is followed to its end, and
        # this task is not started (a submit would clear its answer).
        try:
            cur = await asyncio.to_thread(vs.current, chat, spool=v.spool_dir, url=url)
        except vs.SpoolError:
            cur = None
        if cur and not cur.get("done") and cur.get("question") and vs.valid_id(cur.get("job") or ""):
            waiting = cur["job"]
            await emit({"type": "status", "data": {"description": "The run waits for your answer: asking again (run %s)" % waiting, "done": False, "hidden": False}})
            out = await _relay(vs, chat, waiting, emit, __event_call__, v, done, follow)
            if isinstance(out, str):
                return out
            return (_report(out, tool) + "\n\nThis chat's earlier run %s was waiting for an answer, so the task "
                    "given now was not started: call vm_agent again with it." % waiting)
        try:
            kw = dict(spool=v.spool_dir, timeout=v.timeout or None,
                      env={"VMSPOOL_TASK": task, "VMSPOOL_COMMIT_TOOL": tool},
                      **_command(v.agent_command, v.agent_script, task))
        except ValueError as e:
            await done("No run was started: %s" % e)
            return "No run was started: %s" % e
        try:
            job = await asyncio.to_thread(vs.submit, chat, **kw)
        except vs.SpoolError as e:
            await done("The run could not be queued: %s" % e)
            return "The run could not be queued: %s" % e
        await emit({"type": "status", "data": {"description": "Queued (job %s)" % job, "done": False, "hidden": False}})
        out = await _relay(vs, chat, job, emit, __event_call__, v, done, follow)
        return out if isinstance(out, str) else _report(out, tool)


async def _relay(vs, chat, job, emit, call, v, done, follow):
    """The run relayed to its end: its outcome, or what the model reads
    when the follow was lost. The stop button asks for the job's cancel."""
    try:
        return await vs.relay(chat, job, emit, call, **follow)
    except asyncio.CancelledError:
        await _stopped(vs, job, v, done)
        raise
    except Exception as e:
        await done("Lost track of the run: %s" % e)
        return "Lost track of the run (job %s): %s. `spool show %s` on the host says how it is doing." % (job, e, shlex.quote(job))


async def _stopped(vs, job, v, done):
    """The stop button: the job's cancel is asked for, and the tool returns
    at once. spoold ends the job (SIGTERM, then SIGKILL after its kill
    grace): Open WebUI awaits this task after the cancel with no limit, so
    nothing here waits for a job that ignores SIGTERM."""
    try:
        await asyncio.to_thread(vs.cancel, job, spool=v.spool_dir, bin_dir=v.bin_dir or None)
        said = "Stopped: the cancel of run %s was asked for; spoold ends it." % job
    except Exception as e:
        said = "Stopped, but the cancel of run %s could not be asked for (%s): `spool cancel %s` on the host." % (job, e, shlex.quote(job))
    await done(said)


def _tool_name(name):
    """A commit tool's name as vmgate takes it (vmgate.ValidToolName)."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", name) is not None


def _command(agent_command, agent_script, task):
    """The job's argv or script for the task. The task is data only: the
    script reads it from $VMSPOOL_TASK (a task spliced into shell text runs
    the model's $(...) inside double quotes or an unquoted here-document,
    whatever quoting it was given), and the command gets it as one
    argument, the last, never parsed as an option unless the command
    ended its own options with --. ValueError says what to change."""
    if agent_script.strip():
        if "{task}" in agent_script:
            raise ValueError('the agent_script valve holds {task}, which is no longer replaced (the task could run as '
                             'shell code): read the task from "$VMSPOOL_TASK" instead')
        return {"script": agent_script}
    argv = shlex.split(agent_command)
    if not argv:
        raise ValueError("the agent_command valve is empty")
    if task.startswith("-") and argv[-1] != "--":
        raise ValueError("the task starts with -, which the agent would read as an option: start it with a word, "
                         "or end the agent_command valve with -- if the agent takes that")
    return {"argv": argv + [task]}


def _report(out, commit_tool):
    """What the model reads of the run's end."""
    lines = ["The run %s ended: %s" % (out.get("job"), out.get("state") or "unknown")]
    if out.get("exit") is not None:
        lines[0] += " (exit %s)" % out["exit"]
    err = out.get("error")
    if err:
        lines.append("Error: %s" % err)
        if "vmgate refused" in err:
            # The gate's own text names the same tool: the job carried
            # its name (VMSPOOL_COMMIT_TOOL).
            lines.append("Git writes do not run in the machine: leave the changes in the work tree and call the %s tool to commit them." % commit_tool)
    if out.get("statuses"):
        lines.append("Last statuses:")
        lines += ["- " + s for s in out["statuses"]]
    return "\n".join(lines)
