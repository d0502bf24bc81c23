"""
title: VM run progress (vmspool)
description: Relays the progress of this chat's current vmspool run into the chat, for installations whose own code queues the runs.
requirements:
version: 1.0.0
license: MIT
"""

# The replacement of the old vm_agent_progress function: where your own
# code submits the run (vmspool.submit, spool submit, cron), this tool
# follows the chat's current run and relays it, its questions included,
# until it ends. It never re-implements the guards: watchd's two guards
# (the submitter cleared the chat's last progress; the watcher ignores
# anything stamped before it started) decide which run is followed.

import asyncio
import importlib.util
import os
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
        spool_dir: str = Field(default="/var/spool/vm", description="The spool directory.")
        bin_dir: str = Field(default="/usr/local/bin", description="Where vmspool's binaries (spool, watchd) are.")
        client_path: str = Field(default="/usr/local/lib/vmspool/vmspool.py", description="vmspool's Python client, if it is not importable.")
        status_every: float = Field(default=1.0, description="At most one status per this many seconds (the newest wins).")
        watch_url: str = Field(default="", description="Read progress from watchd serve instead of running watchd follow: its unix socket, unix:/var/spool/vm/watchd/serve.sock (no token: the socket's mode decides), or the http address it printed, http://127.0.0.1:8377/?token=T (without ?token= the token is read from spool_dir's watchd/token, or $WATCHD_TOKEN).")
        timeout: float = Field(default=0, description="Stop following after this many seconds (0: until the run ends).")
        wait_for_run: float = Field(default=15.0, description="With no run going in the chat, wait this many seconds for one to show, then say that nothing is running and return (more than 5: a quiet run shows itself every 5 s).")
        page_url: str = Field(default="", description="The live page of watchd serve as people open it (http://127.0.0.1:8377/, or a proxy's https address): a question's source under the message names <page_url>#chat=<chat>, where the person answers when the dialog is gone.")

    def __init__(self):
        self.valves = self.Valves()

    async def vm_progress(
        self,
        job: str = "",
        __user__: dict = None,
        __metadata__: dict = None,
        __chat_id__: str = None,
        __event_emitter__=None,
        __event_call__=None,
    ) -> str:
        """
        Follow the VM run of this chat to its end, showing its progress and
        asking its questions. Returns how the run ended.
        :param job: The run's job id, if known (it makes the follow exact).
        """
        v = self.valves

        async def done(text):
            if __event_emitter__ is not None:
                await __event_emitter__({"type": "status", "data": {"description": text, "done": True, "hidden": False}})

        try:
            vs = _client(v.client_path)
        except Exception as e:
            await done("vmspool is not installed: %s" % e)
            return "Cannot follow the run: %s" % e
        # The same chat id vm_agent gives a temporary chat or an API call.
        chat = vs.openwebui_chat(__metadata__, __chat_id__, __user__)
        if job and not vs.valid_id(job):
            await done("No run to follow: the job id is not usable.")
            return "No run to follow: job %r." % job
        url = v.watch_url or None
        start_wait = None
        if not job:
            # The chat's run still going is followed by its id (exact, and
            # at once: its question is asked again); with none going, a
            # run is waited for, for a bounded time.
            try:
                cur = await asyncio.to_thread(vs.current, chat, spool=v.spool_dir, url=url)
            except vs.SpoolError:
                cur = None
            if cur and not cur.get("done") and vs.valid_id(cur.get("job") or ""):
                job = cur["job"]
            else:
                start_wait = max(v.wait_for_run, 0.1)
        try:
            out = await vs.relay(chat, job or None, __event_emitter__ or _drop, __event_call__,
                                 every=v.status_every, spool=v.spool_dir, bin_dir=v.bin_dir or None,
                                 url=url, timeout=v.timeout or None, page=v.page_url or None,
                                 start_wait=start_wait)
        except asyncio.CancelledError:
            await done("Stopped following the run (it goes on).")
            raise
        except Exception as e:
            await done("Lost track of the run: %s" % e)
            return "Lost track of the run: %s" % e
        if out.get("state") == "none":
            return "No run is going in this chat (none showed in %g seconds)." % start_wait
        msg = "The run %s ended: %s" % (out.get("job"), out.get("state"))
        if out.get("exit") is not None:
            msg += " (exit %s)" % out["exit"]
        if out.get("error"):
            msg += "\nError: %s" % out["error"]
        return msg


async def _drop(ev):
    pass
