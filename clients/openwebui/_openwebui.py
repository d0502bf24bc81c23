"""Open WebUI, played for the tools' tests: what the tools see of it, as
docs/clients.md ("The Open WebUI tools") describes Open WebUI 0.10, and
nothing the tools could not meet there. Not part of the tools.

- A tool file is imported as Open WebUI imports a pasted one, and called
  as a background task with the reserved arguments filled
  (`__user__`, `__metadata__`, `__chat_id__`, `__message_id__`,
  `__session_id__`, `__event_emitter__`, `__event_call__`).
- `__event_emitter__` records every event; every status must carry
  description, done and hidden.
- `__event_call__` reaches one browser tab (Tab): a tab closed before the
  call returns {"error": "Client session disconnected."} at once; a tab
  showing another chat, a tab closed while the dialog is open, and a
  dialog closed with Escape never return; a person answers a dialog that
  is on screen (OK, Cancel, typed text, an option of a select list, which
  Open WebUI before 0.10 shows as a text field). With a timeout set, the
  call raises python-socketio's own exception (0.10.x) or returns
  {"error": ...} (other versions).
- A temporary chat's id is "local:<socket id>"; a call through the API has
  no chat id and no socket.
- The stop button cancels the tool's task, then awaits it with no limit.
- The loop is uvloop's, as Open WebUI's server runs on it, when uvloop is
  importable; else asyncio's, and LOOP says so.
"""

import asyncio
import importlib.util
import inspect
import os
import secrets
import time
import urllib.parse

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None

HERE = os.path.dirname(os.path.abspath(__file__))

LOOP = "uvloop %s" % uvloop.__version__ if uvloop else "asyncio (uvloop is not importable: apt-get install python3-uvloop)"


def load_tool(filename):
    """Import a tool file as Open WebUI does with a pasted one."""
    spec = importlib.util.spec_from_file_location("owui_" + filename[:-3], os.path.join(HERE, filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(coro):
    """Run coro on Open WebUI's loop (uvloop where importable), and shut
    the loop down as a server does: async generators, then the threads of
    asyncio.to_thread."""
    loop = uvloop.new_event_loop() if uvloop else asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


class SocketTimeout(Exception):
    """What python-socketio raises when WEBSOCKET_EVENT_CALLER_TIMEOUT
    passes (0.10.x lets it reach the tool): not the builtin TimeoutError."""


# What a person sees of a status: Open WebUI draws its description on one
# line (StatusItem.svelte, line-clamp-1), white space collapsed as HTML
# does, cut at the width a person has: about 80 characters.
SEEN = 80


def drawn(description):
    """A status's description as Open WebUI shows it: one line, cut."""
    t = " ".join(description.split())
    return t if len(t) <= SEEN else t[:SEEN - 1] + "…"


class Emitter:
    """__event_emitter__: records every event, as Open WebUI writes each to
    its database."""

    def __init__(self):
        self.events = []

    async def __call__(self, ev):
        assert set(ev) == {"type", "data"}, ev
        if ev["type"] == "status":
            assert set(ev["data"]) >= {"description", "done"}, ev
            assert isinstance(ev["data"]["description"], str), ev
        if ev["type"] in ("source", "citation"):
            # Citations.svelte: each document is one entry's, grouped by
            # its metadata's "source" (else the source's id).
            d = ev["data"]
            assert isinstance(d.get("source"), dict) and isinstance(d["source"].get("name"), str), ev
            assert isinstance(d.get("document"), list) and all(isinstance(x, str) for x in d["document"]), ev
            assert len(d.get("metadata", [])) == len(d["document"]), ev
        self.events.append(ev)

    def statuses(self):
        return [e["data"] for e in self.events if e["type"] == "status"]

    def texts(self):
        return [s["description"] for s in self.statuses()]

    def drawn(self):
        """The statuses as the person sees them: one line each, cut."""
        return [drawn(t) for t in self.texts()]

    def sources(self):
        """The entries under the message: [(name, [documents])], grouped
        by id as Open WebUI groups them."""
        out = {}
        for e in self.events:
            if e["type"] not in ("source", "citation"):
                continue
            d = e["data"]
            for i, doc in enumerate(d["document"]):
                meta = d["metadata"][i] if i < len(d.get("metadata", [])) else {}
                sid = (meta or {}).get("source") or d["source"].get("id") or "N/A"
                name = urllib.parse.unquote(d["source"]["name"])
                out.setdefault(sid, (name, []))[1].append(doc)
        return list(out.values())

    def shown(self):
        """Everything the person can read whole in the chat: the statuses
        as drawn, and the documents of the entries under the message (a
        click shows one whole)."""
        return self.drawn() + [doc for _, docs in self.sources() for doc in docs]

    def visible(self, text):
        """Whether text can be read whole somewhere in the chat."""
        return any(text in x for x in self.shown())


class Dialog:
    """One dialog on screen: its event, and what the person does with it."""

    def __init__(self, tab, ev):
        self.tab, self.event = tab, ev
        self.kind = ev["type"]
        self.data = ev["data"]
        self.reply = asyncio.get_running_loop().create_future()
        self.gone = False  # the tool stopped waiting for it (its task was cancelled)
        self.escaped = False

    @property
    def message(self):
        """What the person reads: the dialog's title, then its message."""
        return self.data.get("title", "") + "\n\n" + self.data.get("message", "")

    @property
    def select(self):
        """The options of a select list (0.10+), or None."""
        inp = self.data.get("input")
        if isinstance(inp, dict) and inp.get("type") == "select":
            return [o["value"] if isinstance(o, dict) else o for o in inp.get("options", [])]
        if self.data.get("type") == "select":
            return [o["value"] if isinstance(o, dict) else o for o in self.data.get("options", [])]
        return None

    def _answer(self, value):
        assert not self.reply.done() and not self.escaped, "the dialog is not open"
        self.reply.set_result(value)

    def ok(self):
        assert self.kind == "confirmation"
        self._answer(True)

    def cancel(self):
        self._answer(False)

    def type(self, text):
        """Typed into an input (or an older Open WebUI's field for a select list)."""
        assert self.kind == "input"
        self._answer(text)

    def choose(self, value):
        """An option of the select list: Open WebUI returns its value."""
        assert self.select is not None and value in self.select, (value, self.select)
        self._answer(value)

    def escape(self):
        """Escape closes the dialog and sends nothing: the call never returns."""
        self.escaped = True

    def backdrop(self):
        """A click on the dark backdrop around the dialog (ConfirmDialog's
        onmousedown) closes it as Escape does: nothing is sent, ever."""
        self.escaped = True

    def enter(self):
        """Enter confirms (ConfirmDialog's keydown): a confirmation sends
        True; an input sends its text as it stands, even when empty (the
        value it was opened with, when nothing was typed)."""
        if self.kind == "confirmation":
            self._answer(True)
        else:
            self._answer(self.data.get("value") or "")


class Tab:
    """The browser tab whose socket a tool's __event_call__ reaches.

    state: "chat" (the chat is on screen), "other" (another chat is),
    "closed". timeout: WEBSOCKET_EVENT_CALLER_TIMEOUT in seconds (None:
    unset, forever), answered by "raise" (0.10.x) or "dict"."""

    def __init__(self, state="chat", timeout=None, timeout_style="raise"):
        self.state = state
        self.timeout, self.timeout_style = timeout, timeout_style
        self.dialogs = []
        self.calls = []
        self._shown = None

    def close(self):
        """The person closes the tab: a dialog open stays unanswered."""
        self.state = "closed"

    async def __call__(self, ev):
        self.calls.append(ev)
        if self.state == "closed":
            return {"error": "Client session disconnected."}
        if self.state == "other":
            return await self._wait(asyncio.get_running_loop().create_future(), None)
        d = Dialog(self, ev)
        self.dialogs.append(d)
        if self._shown is not None:
            self._shown.set()
        return await self._wait(d.reply, d)

    def dialogs_open(self):
        return [d for d in self.dialogs if not d.reply.done() and not d.escaped and not d.gone]

    async def _wait(self, fut, d):
        try:
            if self.timeout is None:
                return await fut
            try:
                return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
            except asyncio.TimeoutError:
                if self.timeout_style == "raise":
                    raise SocketTimeout("Timeout")
                return {"error": "Event call timed out after %g seconds" % self.timeout}
        except asyncio.CancelledError:
            if d is not None:
                d.gone = True
            raise

    async def dialog(self, n=1, within=30.0):
        """Wait until n dialogs have been shown; return the n-th."""
        end = time.monotonic() + within
        while len(self.dialogs) < n:
            self._shown = asyncio.Event()
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no dialog %d within %gs (calls: %s)" % (n, within, self.calls))
            try:
                await asyncio.wait_for(self._shown.wait(), left)
            except asyncio.TimeoutError:
                pass
        return self.dialogs[n - 1]


class Call:
    """One call of a tool, run as Open WebUI runs it: a background task."""

    def __init__(self, coro, emitter):
        self.emitter = emitter
        self.task = asyncio.ensure_future(coro)

    async def result(self, within=120):
        return await asyncio.wait_for(asyncio.shield(self.task), within)

    async def stop(self):
        """The stop button: cancel the task, then await it with no limit.
        Returns how long the await took, in seconds."""
        began = time.monotonic()
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass
        return time.monotonic() - began

    async def until(self, cond, what, within=30.0):
        """Wait for cond(texts of the statuses so far)."""
        end = time.monotonic() + within
        while not cond(self.emitter.texts()):
            if self.task.done():
                self.task.result()
                raise AssertionError("the call ended before %s: %s" % (what, self.emitter.texts()))
            if time.monotonic() > end:
                raise AssertionError("no %s within %gs: %s" % (what, within, self.emitter.texts()))
            await asyncio.sleep(0.02)


class OpenWebUI:
    """Calls a tool's method as Open WebUI does for one user."""

    def __init__(self, user_id="u1"):
        self.user = {"id": user_id, "email": "a@example.org", "name": "A", "role": "user", "valves": {}}

    def call(self, method, *args, chat="chat-1", tab=None, temporary=False, api=False, **kw):
        """Start a call. chat is a normal chat's id; temporary makes the
        chat "local:<the tab's socket id>"; api has no chat and no socket."""
        emitter = Emitter()
        tab = tab if tab is not None else Tab()
        sid = getattr(tab, "sid", None) or secrets.token_urlsafe(15)[:20]
        tab.sid = sid
        meta = {"user_id": self.user["id"], "message_id": secrets.token_hex(8)}
        if api:
            # No chat, no socket: a dialog has nowhere to go.
            tab.state = "closed"
            chat_id = None
        else:
            chat_id = "local:" + sid if temporary else chat
            meta.update(chat_id=chat_id, session_id=sid)
        reserved = {"__user__": self.user, "__metadata__": meta, "__chat_id__": chat_id,
                    "__message_id__": meta["message_id"], "__session_id__": meta.get("session_id"),
                    "__event_emitter__": emitter, "__event_call__": tab}
        # Open WebUI passes the reserved arguments the method declares.
        params = inspect.signature(method).parameters
        kw.update({k: v for k, v in reserved.items() if k in params})
        return Call(method(*args, **kw), emitter)
