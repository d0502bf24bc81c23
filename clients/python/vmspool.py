"""vmspool: queue, follow and answer jobs of a vmspool spool from Python.

One file, the standard library only (Python 3.9+): copy it where your code
can import it. It replaces the old Python paths that queued a run for a
chat, relayed its progress, and refused git writes:

    import vmspool
    job = vmspool.submit("chat-42", argv=["vm-agent", "build me an app"])
    for ev in vmspool.follow("chat-42", job):
        print(ev.kind, ev.text)          # status, question, answer, gap, end
        if ev.kind == "question":
            vmspool.answer("chat-42", "yes", question=ev.question.id)
    vmspool.git_write_in("git add -A")   # "add"

What it does itself, and what it asks the Go commands (docs/clients.md):

- submit() writes the tree as `spool submit` does, in the same order and
  with the same fsyncs: the spec, then the chat's old progress and answer
  removed, then the marker (docs/spool-format.md). Ids follow the same rule.
- follow() never re-implements the watcher's guards: it runs `watchd
  follow --json` (or reads `watchd serve`'s event stream, given its
  address: "unix:/PATH" for its socket, or "http://HOST:PORT" with its
  token, docs/watchd.md "Addresses").
- git_write_in() and gate() ask `vmgate check`: one gate, one verdict.
- answer(), cancel(), show() run `spool answer`, `spool cancel`, `spool
  show`.

Errors are exceptions whose message is the Go side's one line:
InvalidID (a bad chat or job id, raised before any file is touched),
NoSuchJob, NoQuestion, SpoolError for anything else.
"""

import asyncio
import errno
import hashlib
import http.client
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import threading
import time
import urllib.parse

__all__ = [
    "SpoolError", "InvalidID", "NoSuchJob", "NoQuestion", "Answered", "BadAnswer", "Event", "Question",
    "Verdict", "resolve_spool", "valid_id", "new_job_id", "submit", "answer", "cancel", "show", "state",
    "result", "follow", "afollow", "gate", "git_write_in", "current", "relay", "openwebui_chat",
    "answer_hint", "FINAL_STATES",
]

FINAL_STATES = ("done", "failed", "cancelled")
MAX_DOCUMENT = 4 << 20
MAX_ATTEMPTS = 100

_ID_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_ID_RULE = "invalid id (letters, digits, . _ -; must not start with . _ -; max 128)"


class SpoolError(Exception):
    """An error of the spool, with the Go side's one-line message."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class InvalidID(SpoolError, ValueError):
    """A chat or job id breaks the rule ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$."""


class NoSuchJob(SpoolError, LookupError):
    """The job is not in the spool."""


class NoQuestion(SpoolError):
    """No question is open in the chat (or not the one named)."""


class Answered(NoQuestion):
    """The question has an answer already: the first answer wins."""


class BadAnswer(SpoolError, ValueError):
    """The text does not answer the question: not one of its options, or
    empty where the question needs a word (the message says which)."""


# --- ids and the spool's place -------------------------------------------

def valid_id(s):
    """Whether s may name a job or a chat (the spool's one id rule)."""
    return isinstance(s, str) and _ID_RE.match(s) is not None


def _check_id(kind, s):
    if not valid_id(s):
        raise InvalidID("%s %s: %s" % (kind, json.dumps(s) if isinstance(s, str) else repr(s), _ID_RULE))


SYSTEM_SPOOL = "/var/spool/vm"


def _readable(d):
    return os.access(d, os.R_OK | os.X_OK)


def resolve_spool(spool=None, environ=None, uid=None, system=SYSTEM_SPOOL, readable=_readable):
    """The spool directory, found as the Go commands find it: spool, else
    $SPOOL_DIR, else $JOBS_DIR, else /var/spool/vm for root; for anyone
    else the per-user spool ${XDG_STATE_HOME:-~/.local/state}/vmspool if
    it exists, else /var/spool/vm if it exists and the caller may read it,
    else the per-user spool's path."""
    env = os.environ if environ is None else environ
    uid = os.getuid() if uid is None else uid
    for d in (spool, env.get("SPOOL_DIR"), env.get("JOBS_DIR")):
        if d:
            return os.fspath(d)
    if uid == 0:
        return system
    state = env.get("XDG_STATE_HOME")
    if state:
        user = os.path.join(state, "vmspool")
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        user = os.path.join(home, ".local", "state", "vmspool")
    if os.path.isdir(user):
        return user
    if os.path.isdir(system) and readable(system):
        return system
    return user


def _missing_advice(root, system=SYSTEM_SPOOL):
    """What to do about a spool that does not exist, as the Go commands say it."""
    if root == system:
        return ("start spoold, which makes it (the package's spoold.service does), "
                "or set SPOOL_DIR or --spool to another spool")
    try:
        st = os.stat(system)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode) and not _readable(system):
        group = "its group (gid %d)" % st.st_gid
        try:
            import grp
            name = grp.getgrgid(st.st_gid).gr_name
            group = "its group %s (sudo usermod -aG %s $USER, then log in again)" % (name, name)
        except (ImportError, KeyError):
            pass
        return ("the system spool %s is there but closed to you: join %s, "
                "or set SPOOL_DIR or --spool to a spool of your own" % (system, group))
    return "mkdir -p %s (spoold makes the rest), or set SPOOL_DIR or --spool to the spool" % root


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_job_id(now=None):
    """A ULID, as `spool submit` makes them: 26 characters that sort by
    submit time, so that `ls` lists jobs in the order they came."""
    ms = int((time.time() if now is None else now) * 1000)
    n = (ms << 80) | secrets.randbits(80)
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[n & 31])
        n >>= 5
    return "".join(reversed(out))


# --- submit: the tree written as spool submit writes it ---------------------

def _dir_fd(path):
    # The spool's own path may be a symlink, followed as the Go commands
    # follow it (docs/clients.md); no name inside the tree ever is.
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _owner_of(dfd):
    """Whose root's new files in the directory dfd become (uid, gid): the
    directory's, so that the service user's daemons can read what root
    queues; None when not root, or nothing to change."""
    if os.geteuid() != 0:
        return None
    st = os.fstat(dfd)
    if st.st_uid == 0 and st.st_gid == 0:
        return None
    return st.st_uid, st.st_gid


def _write_durable(dfd, name, data, take=False):
    """Write name in the directory dfd atomically and durably: a new
    temporary (O_EXCL, never a link), fsync'd, moved into place and the
    directory fsync'd. With take, it is moved only if name is free
    (FileExistsError otherwise), never over another's (_take)."""
    tmp = ".%s.%s" % (name, secrets.token_hex(8))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 0o640, dir_fd=dfd)
    try:
        try:
            os.fchmod(fd, 0o640)
            owner = _owner_of(dfd)
            if owner is not None:
                os.fchown(fd, *owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if take:
            _take(dfd, tmp, name)
        else:
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    os.fsync(dfd)


_RENAME_NOREPLACE = 1
_renameat2 = None  # libc's renameat2, once looked up; False if it has none


def _libc_renameat2():
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        try:
            import ctypes
            f = ctypes.CDLL(None, use_errno=True).renameat2
            f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            f.restype = ctypes.c_int
            _renameat2 = (f, ctypes)
        except (ImportError, OSError, AttributeError):
            pass
    return _renameat2


def _exists(dfd, name):
    try:
        os.lstat(name, dir_fd=dfd)
        return True
    except FileNotFoundError:
        return False


def _take(dfd, tmp, name):
    """Move the temporary tmp of dfd to name only if name is free, in one
    step, as `spool submit` takes a spec (docs/spool-format.md): of two
    submitters of one id exactly one queues it, the other gets
    FileExistsError. renameat2(RENAME_NOREPLACE) where the filesystem has
    it, else link(2) (NFS, sshfs), else a check and a rename."""
    r2 = _libc_renameat2()
    if r2:
        f, ctypes = r2
        if f(dfd, os.fsencode(tmp), dfd, os.fsencode(name), _RENAME_NOREPLACE) == 0:
            return
        e = ctypes.get_errno()
        if e == errno.EEXIST:
            raise FileExistsError(e, os.strerror(e), name)
        if e not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(e, os.strerror(e), name)
    try:
        os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        os.unlink(tmp, dir_fd=dfd)
        return
    except OSError as e:
        # A link sent again after a lost reply (NFSv3) made the name.
        try:
            a, b = os.lstat(tmp, dir_fd=dfd), os.lstat(name, dir_fd=dfd)
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                os.unlink(tmp, dir_fd=dfd)
                return
        except OSError:
            pass
        # sshfs answers a link over an existing name with EPERM.
        if e.errno == errno.EEXIST or _exists(dfd, name):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name) from None
        if e.errno not in (errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
    if _exists(dfd, name):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name)
    os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def _remove_name(dfd, name, shown):
    """Remove name (never what a link there points to); gone is fine; a
    directory in its place is refused."""
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise SpoolError("%s: is a directory, not a document; move it aside by hand" % shown)
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        pass


def _read_regular(name, limit, dir_fd=None):
    """The bytes of name (in dir_fd when given): a plain file, never
    followed through a link, opened without waiting on a FIFO. None when it
    cannot be opened, is not a plain file, or holds more than limit bytes;
    an error reading it is raised."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        return os.read(fd, min(st.st_size + 1, limit))
    finally:
        os.close(fd)


def _open_subdir(dfd, name, shown):
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise SpoolError("%s is a symlink or a file, not a directory; remove it" % shown) from None
        raise


def submit(chat, argv=None, script=None, *, timeout=None, attempts=None, env=None, cwd=None,
           job_id=None, spool=None):
    """Queue a job for chat and return its id.

    Give argv (a list of strings: run directly, never through a shell) or
    script (bash text, decided by the gate first). timeout is seconds or
    duration text ("45m", "2h", "7d"), written as Go's text ("45m0s");
    attempts how many times it may start in all (0 or None: 1); env extra
    variables (strings); cwd its working directory (a relative one is
    spoold's). A spec the Go side would refuse is refused here, with its
    words (tests/testdata/contract/submit.json holds both writers to one
    set of cases).

    The order is the contract's: <job>.json written and fsync'd; the chat's
    progress/<chat> and chats/<chat>/answer.json removed (a run of this
    chat can never read the last run's ending); then <job>.ready created
    and fsync'd, whose appearance queues the job. A bad id raises
    InvalidID before any file is touched; on any error nothing of the job
    is left behind.
    """
    if chat is None or chat == "":
        raise SpoolError('spec has no "chat"')
    _check_id("chat", chat)
    if job_id:
        _check_id("job", job_id)
    spec = {"id": job_id or new_job_id(), "chat": chat, "created": time.time()}
    spec.update(_spec_fields(argv, script, timeout, attempts, env, cwd))
    data = (json.dumps(spec, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    if len(data) > MAX_DOCUMENT:
        raise SpoolError("job %s: spec: too large (%d bytes, limit %d)" % (spec["id"], len(data), MAX_DOCUMENT))

    root = resolve_spool(spool)
    job = spec["id"]
    _check_floor(root)
    try:
        dfd = _dir_fd(root)
    except FileNotFoundError:
        raise SpoolError("spool %s: no such spool directory: %s" % (root, _missing_advice(root))) from None
    except NotADirectoryError:
        raise SpoolError("spool %s: not a directory" % root) from None
    except OSError as e:
        raise SpoolError("spool %s: %s" % (root, e.strerror)) from None
    try:
        # The spool's one rule of a taken id: any of its state names.
        for ext in (".json", ".ready", ".running", ".done", ".failed", ".cancelled"):
            if _exists(dfd, job + ext):
                raise SpoolError("job %s: already exists (%s)" % (job, os.path.join(root, job + ext)))
        try:
            _write_durable(dfd, job + ".json", data, take=True)
        except FileExistsError:
            raise SpoolError("job %s: already exists (%s)" % (job, os.path.join(root, job + ".json"))) from None
        except OSError as e:
            raise SpoolError("job %s: writing spec: %s" % (job, e.strerror)) from None
        try:
            _clear_chat(dfd, root, chat)
            _write_durable(dfd, job + ".ready", b"")
        except BaseException as e:
            try:
                os.unlink(job + ".json", dir_fd=dfd)
            except OSError:
                pass
            if isinstance(e, OSError):
                raise SpoolError("job %s: %s" % (job, e.strerror)) from None
            raise
        _ring(dfd, job)
    finally:
        os.close(dfd)
    return job


def _ring(dfd, job):
    """Ring the doorbell for job after its marker, as spool submit does: a
    new doorbell/<job>, so that a daemon polling a shared filesystem finds
    the job without listing the root (docs/spoold.md, "Claiming"). A hint
    only: no doorbell/ (an older daemon's spool), or any error, and the
    job is found as a hand submission is."""
    try:
        bfd = os.open("doorbell", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            os.close(os.open(job, flags, 0o640, dir_fd=bfd))
            return
        except FileExistsError:
            pass
        # Rung already: a new bell, since only a change of names moves
        # doorbell/'s stamp.
        tmp = ".%s.%s" % (job, secrets.token_hex(8))
        os.close(os.open(tmp, flags, 0o640, dir_fd=bfd))
        try:
            os.rename(tmp, job, src_dir_fd=bfd, dst_dir_fd=bfd)
        except OSError:
            os.unlink(tmp, dir_fd=bfd)
    except OSError:
        pass
    finally:
        os.close(bfd)


def _text(v):
    """v as text for the spec (a str, or a path), or None."""
    try:
        v = os.fspath(v)
    except TypeError:
        return None
    return v if isinstance(v, str) else None


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v):
    """A value's kind in JSON's words, as spool submit --spec says it."""
    if isinstance(v, bool):
        return "true or false"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, (str, bytes)):
        return "a string"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "a list"
    if v is None:
        return "null"
    return "a " + type(v).__name__


def _spec_fields(argv, script, timeout, attempts, env, cwd):
    """The spec's fields of what runs and how, checked as Go's
    Spec.Validate checks them, with its words."""
    out = {}
    if argv is not None and script is not None:
        raise SpoolError('spec has both "argv" and "script"; give exactly one')
    if argv is None and script is None:
        raise SpoolError('spec has neither "argv" nor "script"; give exactly one')
    if argv is not None:
        if isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple)):
            raise SpoolError('spec\'s "argv" is %s; want a list of strings' % _kind(argv))
        words = [_text(a) for a in argv]
        if None in words:
            raise SpoolError('spec\'s "argv" holds %s; want a list of strings' % _kind(argv[words.index(None)]))
        if not words:
            raise SpoolError('spec\'s "argv" is empty: nothing to run')
        if not words[0]:
            raise SpoolError('spec\'s "argv[0]" is empty: nothing to run')
        if any("\x00" in a for a in words):
            raise SpoolError('spec\'s "argv" holds a NUL byte')
        out["argv"] = words
    else:
        if not isinstance(script, str):
            raise SpoolError('spec\'s "script" is %s; want text' % type(script).__name__)
        if not script.strip():
            raise SpoolError('spec\'s "script" is empty: nothing to run')
        out["script"] = script
    if cwd is not None and cwd != "":
        text = _text(cwd)
        if text is None:
            raise SpoolError('spec\'s "cwd" is %s; want a path' % type(cwd).__name__)
        if "\x00" in text:
            raise SpoolError('spec\'s "cwd" holds a NUL byte')
        out["cwd"] = text
    if env is not None:
        if not isinstance(env, dict):
            raise SpoolError('spec\'s "env" is %s; want names and values' % type(env).__name__)
        env = {k: "" if v is None else v for k, v in env.items()}  # null reads as "" in Go
        for k, v in env.items():
            if not isinstance(k, str) or not k or "=" in k or "\x00" in k:
                raise SpoolError('spec\'s "env" has an invalid name %s' % json.dumps(k))
            if not isinstance(v, str):
                raise SpoolError('spec\'s "env" value of %s is %s; want text' % (k, type(v).__name__))
            if "\x00" in v:
                raise SpoolError('spec\'s "env" value of %s holds a NUL byte' % k)
        if env:
            out["env"] = dict(env)
    ns = _timeout_ns(timeout)
    if ns:
        out["timeout"] = _go_duration(ns)
    if attempts is not None:
        if not isinstance(attempts, int) or isinstance(attempts, bool):
            raise SpoolError('spec\'s "attempts" is %s; want a whole number from 1 to %d' % (json.dumps(attempts), MAX_ATTEMPTS))
        if not 0 <= attempts <= MAX_ATTEMPTS:
            raise SpoolError('spec\'s "attempts" is %d; want 1 to %d' % (attempts, MAX_ATTEMPTS))
        if attempts:  # 0 means 1, as in a document
            out["attempts"] = attempts
    return out


# --- durations: the spool's one grammar ----------------------------------------

_NS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
       "h": 3600 * 10**9}
_DECIMAL = re.compile(r"\A(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\Z")
_GO_PART = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h)"
_GO_TEXT = re.compile(r"\A[-+]?(?:0|(?:%s)+)\Z" % _GO_PART)
_MAX_NS = (1 << 63) - 1  # what Go's time.Duration holds


def _parse_duration(s):
    """Nanoseconds of s in the grammar of Go's spool.ParseDuration (one for
    the spec's timeout and every flag): Go's text (45m, 1h30m, 500ms),
    days (7d, 1.5d), or seconds (90, 2.5); never negative, never more than
    a Go duration holds."""
    from fractions import Fraction
    num, unit = s, 10**9
    if s.endswith("d"):
        num, unit = s[:-1], 86400 * 10**9
    if _DECIMAL.match(num):
        ns = int(Fraction(num) * unit)
        if ns > _MAX_NS:
            raise SpoolError("duration %s is out of range" % json.dumps(s))
        return ns
    if not _GO_TEXT.match(s):
        raise SpoolError("duration %s: want text like 45m, 2h, 7d or a number of seconds" % json.dumps(s))
    ns = int(sum(Fraction(n) * _NS[u] for n, u in re.findall(r"([0-9.]+)([^0-9.]+)", s.lstrip("+-"))))
    if ns > _MAX_NS:
        raise SpoolError("duration %s: want text like 45m, 2h, 7d or a number of seconds" % json.dumps(s))
    if s.startswith("-") and ns:
        raise SpoolError("duration %s is negative" % json.dumps(s))
    return ns


def _timeout_ns(timeout):
    """The spec's timeout in nanoseconds (0: none) from seconds or text."""
    if timeout is None or timeout == "":
        return 0
    if isinstance(timeout, str):
        return _parse_duration(timeout)
    if not _is_number(timeout):
        raise SpoolError("duration %s: want text like 45m, 2h, 7d or a number of seconds" % json.dumps(timeout))
    if timeout != timeout or timeout < 0 or timeout * 10**9 >= _MAX_NS:
        raise SpoolError("duration %s is out of range" % timeout)
    return int(timeout * 10**9)


def _go_duration(ns):
    """ns as Go's time.Duration.String() writes it (45m0s, 1.5ms): the
    spec's timeout is Go's text (docs/spool-format.md)."""
    def frac(v, prec):
        whole, rest = divmod(v, 10**prec)
        digits = ("%0*d" % (prec, rest)).rstrip("0")
        return "%d%s" % (whole, "." + digits if digits else "")
    if ns < 10**3:
        return "%dns" % ns if ns else "0s"
    if ns < 10**6:
        return frac(ns, 3) + "\u00b5s"
    if ns < 10**9:
        return frac(ns, 6) + "ms"
    secs, rest = divmod(ns, 10**9)
    out = frac(secs % 60 * 10**9 + rest, 9) + "s"
    if secs >= 60:
        out = "%dm" % (secs // 60 % 60) + out
    if secs >= 3600:
        out = "%dh" % (secs // 3600) + out
    return out


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "tib": 1 << 40}


def _size(s):
    """A size as Go's spool.ParseSize reads it, with its words."""
    m = re.match(r"([0-9.]*)(.*)\Z", s.strip(), re.S)
    num, unit = m.group(1), m.group(2).strip().lower()
    if not re.match(r"\A(?:[0-9]+\.?[0-9]*|\.[0-9]+)\Z", num):
        raise SpoolError("size %s: want bytes, or a number with k, M, G or T (powers of 1024)" % json.dumps(s))
    if unit not in _SIZE_UNITS:
        raise SpoolError("size %s: unknown unit %s (k, M, G or T)" % (json.dumps(s), json.dumps(m.group(2).strip())))
    n = float(num) * _SIZE_UNITS[unit]
    if n > (1 << 62):
        raise SpoolError("size %s: too large" % json.dumps(s))
    return int(n)


def _fmt_size(n):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return "%.1f %s" % (n / k, unit)
    return "%d bytes" % n


def _check_floor(root, environ=None):
    """Refuse below the spool's free-space floor, as spool submit does:
    64 MiB, 1 % or 1,000 inodes free, or what $SPOOL_MIN_FREE,
    $SPOOL_MIN_FREE_PERCENT and $SPOOL_MIN_FREE_INODES say (0: off)."""
    env = os.environ if environ is None else environ
    floor_bytes, floor_pct, floor_inodes = 64 << 20, 1.0, 1000
    v = env.get("SPOOL_MIN_FREE")
    if v:
        try:
            floor_bytes = _size(v)
        except SpoolError as e:
            raise SpoolError("$SPOOL_MIN_FREE: %s" % e) from None
    v = env.get("SPOOL_MIN_FREE_PERCENT")
    if v:
        n = v[:-1] if v.endswith("%") else v
        if not re.match(r"\A(?:[0-9]+\.?[0-9]*|\.[0-9]+)\Z", n) or float(n) > 100:
            raise SpoolError("$SPOOL_MIN_FREE_PERCENT %s: want 0 to 100" % json.dumps(v))
        floor_pct = float(n)
    v = env.get("SPOOL_MIN_FREE_INODES")
    if v:
        if not re.match(r"\A[0-9]+\Z", v):
            raise SpoolError("$SPOOL_MIN_FREE_INODES %s: want a count" % json.dumps(v))
        floor_inodes = int(v)
    try:
        st = os.statvfs(root)
    except OSError:
        return  # the open that follows says what is wrong
    free, size = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    hint = 'free some space, or lower the floor (docs/operations.md, "Limits")'
    why = None
    if floor_bytes and free < floor_bytes:
        why = "%s free, the floor is %s" % (_fmt_size(free), _fmt_size(floor_bytes))
    elif floor_pct and size and free * 100 < floor_pct * size:
        why = "%.2f%% free, the floor is %g%%" % (free * 100 / size, floor_pct)
    elif floor_inodes and st.f_files and st.f_ffree < floor_inodes:
        why = "%d inodes free, the floor is %d" % (st.f_ffree, floor_inodes)
    if why:
        raise SpoolError("spool %s: below the free-space floor: %s; %s" % (root, why, hint))


def _clear_chat(dfd, root, chat):
    pfd = _open_subdir(dfd, "progress", os.path.join(root, "progress"))
    if pfd is not None:
        try:
            _remove_name(pfd, chat, os.path.join(root, "progress", chat))
        finally:
            os.close(pfd)
    cfd = _open_subdir(dfd, "chats", os.path.join(root, "chats"))
    if cfd is None:
        return
    try:
        chfd = _open_subdir(cfd, chat, os.path.join(root, "chats", chat))
        if chfd is None:
            return
        try:
            _remove_name(chfd, "answer.json", os.path.join(root, "chats", chat, "answer.json"))
        finally:
            os.close(chfd)
    finally:
        os.close(cfd)


# --- the Go commands -------------------------------------------------------

def _bin(name, bin_dir=None):
    if bin_dir:
        return os.path.join(bin_dir, name)
    return shutil.which(name) or name


def _run(cmd, *, stdin=None, timeout=None):
    try:
        p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, check=False)
    except FileNotFoundError:
        raise SpoolError("%s: not found (install vmspool's binaries, or pass bin_dir)" % cmd[0]) from None
    return p


def _error_of(p, default):
    line = (p.stderr or b"").decode("utf-8", "replace").strip().splitlines()
    return line[-1] if line else default


def _raise(p, what):
    msg = _error_of(p, "%s exited %d" % (what, p.returncode))
    if p.returncode == 2 and "invalid id" in msg:
        raise InvalidID(msg, p.returncode)
    if "no such job" in msg:
        raise NoSuchJob(msg, p.returncode)
    raise SpoolError(msg, p.returncode)


def _spool_args(spool, bin_dir):
    return [_bin("spool", bin_dir), "--spool", resolve_spool(spool)]


def answer(chat, text, *, question=None, spool=None, bin_dir=None):
    """Answer the open question of chat's run (`spool answer`). Raises
    NoQuestion if none is open, or if question names another."""
    _check_id("chat", chat)
    cmd = _spool_args(spool, bin_dir) + ["answer", "--chat", chat]
    if question:
        cmd += ["--question", question]
    p = _run(cmd + ["--", text])
    if p.returncode == 1:
        msg = _error_of(p, "no question open")
        raise (Answered if "already answered" in msg else NoQuestion)(msg, 1)
    if p.returncode == 2 and "not an answer to the question" in _error_of(p, ""):
        raise BadAnswer(_error_of(p, ""), 2)
    if p.returncode != 0:
        _raise(p, "spool answer")


def cancel(job, *, wait=None, spool=None, bin_dir=None):
    """Request a cancel of job (`spool cancel`). With wait (seconds), wait
    that long for its end and return its final state (None if it did not
    end in time)."""
    _check_id("job", job)
    cmd = _spool_args(spool, bin_dir) + ["cancel", job]
    if wait:
        cmd += ["--wait", "--timeout", "%gs" % float(wait)]
    p = _run(cmd)
    if wait and p.returncode == 124:
        return None
    if p.returncode != 0:
        _raise(p, "spool cancel")
    if wait:
        out = p.stdout.decode().strip().split()
        return next((w for w in out if w in FINAL_STATES), None)
    return None


def show(job, *, spool=None, bin_dir=None):
    """Everything `spool show --json` says of job, as a dict."""
    _check_id("job", job)
    p = _run(_spool_args(spool, bin_dir) + ["show", "--json", job])
    if p.returncode != 0:
        _raise(p, "spool show")
    return json.loads(p.stdout)


def state(job, **kw):
    """The job's state: new, queued, running, done, failed or cancelled."""
    return show(job, **kw)["state"]


def result(job, **kw):
    """The job's result document (state, exit, error, attempt...) once it
    has ended, else None."""
    return show(job, **kw).get("result")


# --- the gate ------------------------------------------------------------

class Verdict:
    """The gate's decision on one script (vmgate check --json)."""

    def __init__(self, d):
        self.allowed = bool(d.get("allowed"))
        self.git = d.get("git")
        self.reason = d.get("reason")
        self.message = d.get("message") or ""
        self.line = d.get("line")
        self.command = d.get("command")

    def __repr__(self):
        return "Verdict(allowed=%r, git=%r, reason=%r)" % (self.allowed, self.git, self.reason)


def gate(script, *, commit_tool=None, bin_dir=None):
    """Ask vmgate whether script may run; return its Verdict."""
    cmd = [_bin("vmgate", bin_dir), "check", "--json"]
    if commit_tool:
        cmd += ["--commit-tool", commit_tool]
    p = _run(cmd + ["-"], stdin=script.encode("utf-8", "surrogateescape"))
    if p.returncode not in (0, 1):
        _raise(p, "vmgate check")
    try:
        return Verdict(json.loads(p.stdout))
    except ValueError:
        raise SpoolError(_error_of(p, "vmgate check printed no verdict")) from None


def git_write_in(script, **kw):
    """The old detector's answer: the git subcommand the script would write
    with ("add", "commit", "push", ...), or None if the gate allows it. A
    script refused for another reason (one the gate cannot read, or a
    rule) gives that reason ("undecidable", "parse-error", "policy"), so
    that `if git_write_in(s): refuse` still refuses it."""
    v = gate(script, **kw)
    if v.allowed:
        return None
    return v.git or v.reason or "git-write"


# --- following a run -------------------------------------------------------

class Question:
    """A question the run asks: its id, text and options."""

    def __init__(self, d):
        d = d or {}
        self.id = d.get("id") or ""
        self.text = d.get("text") or ""
        self.options = list(d.get("options") or [])
        self.allow_empty = d.get("allow_empty") is True

    def __repr__(self):
        return "Question(id=%r, text=%r, options=%r)" % (self.id, self.text, self.options)


class Event:
    """One thing to tell the person, as watchd says it.

    kind is status, note (a daemon's note: start, gate, worker), answer,
    question, gap (events lost to the window) or end (always the last).
    text is the line a person reads; question is set on a question; state,
    exit and error on the end; done is True on the end only.
    """

    def __init__(self, d, done=False):
        self.kind = d.get("kind") or "status"
        self.job = d.get("job") or ""
        self.seq = d.get("seq") or 0
        self.text = d.get("text") or ""
        self.event = d.get("event")
        self.question = Question(d["question"]) if d.get("question") else None
        self.skipped = d.get("skipped") or 0
        self.state = d.get("state")
        self.exit = d.get("exit")
        self.error = d.get("error")
        self.done = done or self.kind == "end"

    def __repr__(self):
        return "Event(kind=%r, text=%r)" % (self.kind, self.text)


def _event_of_line(line):
    d = json.loads(line)
    run = d.get("vmspool")
    data = d.get("data") or {}
    if run is None:
        # A line without structure (the timeout's): a status, done or not.
        return Event({"kind": "end" if data.get("done") else "status", "text": data.get("description", ""),
                      "state": "timeout" if data.get("done") else None}, done=bool(data.get("done")))
    return Event(run, done=bool(data.get("done")))


def _follow_cmd(chat, job, every, timeout, spool, bin_dir, poll):
    _check_id("chat", chat)
    if job:
        _check_id("job", job)
    cmd = [_bin("watchd", bin_dir), "follow", "--spool", resolve_spool(spool), "--chat", chat, "--json"]
    if job:
        cmd += ["--job", job]
    if every:
        cmd += ["--every", "%gs" % float(every)]
    if timeout:
        cmd += ["--timeout", "%gs" % float(timeout)]
    if poll:
        cmd += ["--poll", "%gs" % float(poll)]
    return cmd


def follow(chat, job=None, *, url=None, every=None, timeout=None, spool=None, bin_dir=None, poll=None, token=None):
    """Yield the Events of chat's run (job, if given: pass the id submit
    returned, it keeps the guards exact) until its end, which is the last.

    By default it runs `watchd follow --json`; with url it reads the
    chat's event stream from watchd serve: "unix:/var/spool/vm/watchd/serve.sock"
    (its socket: no token), or "http://127.0.0.1:8377" (TCP: the token is
    token, else the URL's #token= or ?token=, else $WATCHD_TOKEN, else the spool's
    watchd/token if this user may read it). every
    (seconds) relays at most one status per window, the newest winning.
    timeout (seconds): the last Event is then an end with state
    "timeout". Closing the generator stops the follower.
    """
    if url:
        yield from _follow_url(url, chat, job, timeout, token, spool)
        return
    cmd = _follow_cmd(chat, job, every, timeout, spool, bin_dir, poll)
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise SpoolError("%s: not found (install vmspool's binaries, or pass bin_dir)" % cmd[0]) from None
    ended = False
    try:
        for line in p.stdout:
            if not line.strip():
                continue
            ev = _event_of_line(line)
            yield ev
            if ev.done:
                ended = True
                break
    finally:
        if p.poll() is None and not ended:
            p.terminate()
        err = p.stderr.read() if ended or p.poll() is not None else b""
        p.wait()
        p.stdout.close()
        p.stderr.close()
    if not ended and p.returncode not in (None, -15):
        msg = err.decode("utf-8", "replace").strip().splitlines()
        raise SpoolError(msg[-1] if msg else "watchd follow exited %d" % p.returncode, p.returncode)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket. A path longer than a socket address may be
    (108 bytes) is reached through its directory's handle."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            if len(os.fsencode(self._path)) < 100:
                s.connect(self._path)
            else:
                fd = os.open(os.path.dirname(self._path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    s.connect("/proc/self/fd/%d/%s" % (fd, os.path.basename(self._path)))
                finally:
                    os.close(fd)
        except BaseException:
            s.close()
            raise
        self.sock = s


_TOKEN_RE = re.compile(r"\A[A-Za-z0-9._~+/=-]{16,512}\Z")


def _read_token_file(path):
    """The token in path (a plain file, never a link, at most 4 KiB), or
    None if it cannot be read."""
    raw = _read_regular(path, 4096)
    if raw is None:
        return None
    tok = raw.decode("ascii", "replace").strip()
    return tok if _TOKEN_RE.match(tok) else None


def _watch_address(url, token=None, spool=None):
    """(connection factory, path prefix, token, the address as shown) for
    watchd serve's address (docs/watchd.md, "Addresses")."""
    if url.startswith("unix:") or url.startswith("/"):
        path = url[5:] if url.startswith("unix:") else url
        if path.startswith("//"):
            path = path[2:]
        if not os.path.isabs(path):
            raise SpoolError("watchd address %s: a unix socket is unix:/ABSOLUTE/PATH" % json.dumps(url))
        return (lambda t: _UnixHTTPConnection(path, t)), "", None, "unix:" + path
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise SpoolError("watchd address %s: want http://HOST:PORT, https://... or unix:/PATH" % json.dumps(url.split("?")[0]))
    # The address watchd serve prints carries the token in its fragment
    # (#token=T); before, in its query (?token=T): either is taken.
    tok = (token or urllib.parse.parse_qs(u.fragment).get("token", [None])[0]
           or urllib.parse.parse_qs(u.query).get("token", [None])[0] or os.environ.get("WATCHD_TOKEN"))
    if not tok:
        tok = _read_token_file(os.path.join(resolve_spool(spool), "watchd", "token"))
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    shown = "%s://%s%s" % (u.scheme, u.netloc, u.path)
    return (lambda t: cls(u.netloc, timeout=t)), u.path.rstrip("/"), tok, shown


def _follow_url(url, chat, job, timeout, token=None, spool=None):
    _check_id("chat", chat)
    if job:
        _check_id("job", job)
    connect, prefix, tok, shown = _watch_address(url, token, spool)
    path = "%s/chats/%s/events" % (prefix, urllib.parse.quote(chat))
    if job:
        path += "?" + urllib.parse.urlencode({"job": job})
    headers = {"Accept": "text/event-stream"}
    if tok:
        headers["Authorization"] = "Bearer " + tok
    deadline = time.monotonic() + timeout if timeout else None
    conn = connect(30)
    try:
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            raise SpoolError("watchd serve at %s: %s" % (shown, e)) from None
        if resp.status != 200:
            body = resp.read(4096).decode("utf-8", "replace").strip().splitlines()
            raise SpoolError("watchd serve at %s: %d %s: %s" % (shown, resp.status, resp.reason, body[0] if body else ""),
                             resp.status)
        kind, data = None, []
        while True:
            raw = resp.readline(1 << 20)
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith(":"):
                pass
            elif line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line == "" and data:
                d = json.loads("\n".join(data))
                d.setdefault("kind", kind)
                ev = Event(d)
                yield ev
                if ev.done:
                    return
                kind, data = None, []
            if deadline and time.monotonic() > deadline:
                yield Event({"kind": "end", "state": "timeout", "text": "timed out waiting for the run to end"})
                return
    finally:
        conn.close()


async def afollow(chat, job=None, *, url=None, every=None, timeout=None, spool=None, bin_dir=None, poll=None,
                  token=None):
    """follow() for asyncio: an async generator of the same Events.
    Closing it, or cancelling the task that iterates it, ends watchd."""
    if url:
        async for ev in _athread(_follow_url(url, chat, job, timeout, token, spool)):
            yield ev
        return
    cmd = _follow_cmd(chat, job, every, timeout, spool, bin_dir, poll)
    try:
        p = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.PIPE, limit=4 << 20)
    except FileNotFoundError:
        raise SpoolError("%s: not found (install vmspool's binaries, or pass bin_dir)" % cmd[0]) from None
    ended = False
    try:
        while True:
            line = await p.stdout.readline()
            if not line:
                break
            if not line.strip():
                continue
            ev = _event_of_line(line)
            ended = ev.done
            yield ev
            if ended:
                return
    finally:
        if p.returncode is None and not ended:
            try:
                p.terminate()
            except ProcessLookupError:
                pass
        err = await p.stderr.read()
        await p.wait()
    if not ended:
        msg = err.decode("utf-8", "replace").strip().splitlines()
        raise SpoolError(msg[-1] if msg else "watchd follow exited %d" % p.returncode, p.returncode)


async def _athread(gen):
    """Iterate a blocking generator in a thread, for asyncio."""
    loop = asyncio.get_running_loop()
    q = asyncio.Queue()

    def pump():
        try:
            for ev in gen:
                loop.call_soon_threadsafe(q.put_nowait, ("ev", ev))
        except BaseException as e:  # handed to the consumer
            loop.call_soon_threadsafe(q.put_nowait, ("err", e))
        loop.call_soon_threadsafe(q.put_nowait, ("eof", None))

    threading.Thread(target=pump, name="vmspool-follow", daemon=True).start()
    while True:
        what, v = await q.get()
        if what == "eof":
            return
        if what == "err":
            raise v
        yield v


# --- the chat's current run ---------------------------------------------------

def current(chat, *, spool=None, url=None, token=None):
    """The chat's progress document (a dict) if one is there, else None:
    what the chat's current run (or its last, when "done" is true) shows.
    Read from the tree (progress/<chat>: a plain file, never a link, at
    most 16 MiB), or from watchd serve's GET /chats/C given url."""
    _check_id("chat", chat)
    if url:
        connect, prefix, tok, shown = _watch_address(url, token, spool)
        conn = connect(10)
        try:
            headers = {"Accept": "application/json"}
            if tok:
                headers["Authorization"] = "Bearer " + tok
            try:
                conn.request("GET", "%s/chats/%s" % (prefix, urllib.parse.quote(chat)), headers=headers)
                resp = conn.getresponse()
                body = resp.read(16 << 20)
            except OSError as e:
                raise SpoolError("watchd serve at %s: %s" % (shown, e)) from None
            if resp.status == 404:
                return None
            if resp.status != 200:
                raise SpoolError("watchd serve at %s: %d %s" % (shown, resp.status, resp.reason), resp.status)
        finally:
            conn.close()
    else:
        try:
            dfd = _dir_fd(resolve_spool(spool))
        except OSError:
            return None
        try:
            pfd = _open_subdir(dfd, "progress", "progress")
            if pfd is None:
                return None
            try:
                body = _read_regular(chat, 16 << 20, dir_fd=pfd)
            finally:
                os.close(pfd)
            if body is None:
                return None
        finally:
            os.close(dfd)
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _answer_of(chat, qid, spool=None):
    """The answer chats/<chat>/answer.json gives question qid, or None (no
    such answer, or not readable here: a client given only watchd's
    address)."""
    try:
        dfd = _dir_fd(resolve_spool(spool))
    except OSError:
        return None
    try:
        cfd = _open_subdir(dfd, "chats", "chats")
        if cfd is None:
            return None
        try:
            chfd = _open_subdir(cfd, chat, chat)
        finally:
            os.close(cfd)
        if chfd is None:
            return None
        try:
            raw = _read_regular("answer.json", MAX_DOCUMENT, dir_fd=chfd)
        finally:
            os.close(chfd)
        if raw is None:
            return None
        doc = json.loads(raw)
    except (OSError, ValueError, SpoolError):
        return None
    finally:
        os.close(dfd)
    if isinstance(doc, dict) and doc.get("question") == qid and isinstance(doc.get("answer"), str):
        return doc["answer"]
    return None


# --- chats of Open WebUI -------------------------------------------------------

# The beginnings of the ids openwebui_chat derives: "<kind>-" carries a
# part as it was given, "<kind>_" the hash of one (or "api_anonymous").
# A chat id of Open WebUI that begins with any of them is never passed
# through, so a raw id and a derived one are never the same.
_DERIVED = ("local-", "local_", "api-", "api_", "chat_")


def openwebui_chat(metadata=None, chat_id=None, user=None):
    """The spool's chat id for a call of Open WebUI (docs/clients.md,
    "Chat ids"), one of its own for every chat and user:

    - its chat id when that is an id and does not begin as a derived one
      does (local- local_ api- api_ chat_): a normal chat's uuid4, as it is;
    - a temporary chat's "local:<socket id>" as "local-<socket id>", so the
      same temporary chat keeps its id;
    - a call through the API, which has no chat, as "api-<user id>", so one
      user's API runs are one chat's runs, one after the other; with no
      user (none, or an empty id), "api_anonymous";
    - where a socket id or a user id would break the id rule,
      "local_<hash>" or "api_<hash>"; any other chat id, one that breaks
      the rule or begins as a derived id does, "chat_<hash>".

    <hash> is the first 32 hex digits of the SHA-256 of what it replaces
    (UTF-8). Two different calls never get one id (short of two texts
    whose SHA-256 begin alike for 128 bits): a raw id keeps none of the
    derived beginnings, and a part as it is follows "-", a hash "_"."""
    meta = metadata or {}
    raw = meta.get("chat_id") or chat_id or ""
    if not isinstance(raw, str):
        raw = str(raw)
    if raw.startswith("local:"):
        return _derived("local", raw[len("local:"):])
    if raw:
        if valid_id(raw) and not raw.startswith(_DERIVED):
            return raw
        return "chat_" + _hash32(raw)
    uid = (user or {}).get("id") if isinstance(user, dict) else None
    uid = uid or meta.get("user_id")
    if uid is None or uid == "":
        return "api_anonymous"
    return _derived("api", str(uid))


def _derived(kind, part):
    """kind-part where that is an id, else kind_<the part's hash>."""
    cand = "%s-%s" % (kind, part)
    if part and valid_id(cand):
        return cand
    return "%s_%s" % (kind, _hash32(part))


def _hash32(s):
    return hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# --- relaying a run into an Open WebUI chat -----------------------------------

_YES = ("yes", "y", "ok", "true")
_NO = ("no", "n", "cancel", "false")


def _yes_no(options):
    """The (yes, no) options of a yes/no question, or None."""
    if len(options) != 2:
        return None
    a, b = options
    if a.strip().lower() in _YES and b.strip().lower() in _NO:
        return a, b
    if b.strip().lower() in _YES and a.strip().lower() in _NO:
        return b, a
    return None


def answer_hint(chat, q):
    """The shell line that answers q elsewhere, for a person to paste (an
    operator, often as root): every word quoted for the shell, and the
    question named only if its id is an id (watchd relays no other)."""
    line = "spool answer --chat %s" % shlex.quote(chat)
    if q is not None and valid_id(q.id):
        line += " --question %s" % shlex.quote(q.id)
    return line + " TEXT"


def page_of(page, chat):
    """The live page's address for chat: page (watchd serve's page as
    people open it) with #chat=<chat>, which shows that chat alone; "" when
    there is no page. A token in page is left out: the address is shown
    in the chat, and kept in Open WebUI's database."""
    if not page:
        return ""
    u = urllib.parse.urlsplit(page)
    query = urllib.parse.urlencode([(k, v) for k, v in urllib.parse.parse_qsl(u.query) if k != "token"])
    return urllib.parse.urlunsplit((u.scheme, u.netloc, u.path or "/", query, "chat=" + chat))


# What a person sees of a status: Open WebUI draws it on one line
# (line-clamp-1), at a normal width its first 60 to 80 characters. Every
# status the relay writes says what matters in its first STATUS_SEEN
# characters, and none is longer than STATUS_MAX (each is written to Open
# WebUI's database, and the rest is never seen).
STATUS_SEEN = 80
STATUS_MAX = 180


def one_line(text, width):
    """text on one line (its runs of white space, newlines too, one space),
    cut to at most width characters, the cut marked with "…"."""
    t = " ".join(str(text).split())
    return t if len(t) <= width else t[:max(width - 1, 0)] + "…"


def _fits(head, text, width=STATUS_SEEN):
    """head, then text cut so that the whole is at most width characters
    (text keeps at least 20 of them)."""
    return head + one_line(text, max(width - len(head), 20))


def question_line(q):
    """The question on one line, its options after it: what a status says."""
    return q.text + (" [%s]" % "/".join(q.options) if q.options else "")


def _fence(text):
    """A markdown code fence longer than any run of backquotes in text."""
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, run + 1)


def where_source(chat, q, page=None, dialog=True):
    """The source event (Open WebUI's citation) that keeps where to answer
    q under the message, whole, while the question is open: a status is
    one line, a notification goes after seconds, and what the tool returns
    comes only at the run's end. Its name is what the list of sources
    shows (one line); its document, shown whole on a click, names every
    place. Open WebUI draws the document as markdown: it holds the page's
    address (the page_url valve, an operator's) and the quoted line in a
    code span, never the run's text (the question is in the name, drawn
    as text)."""
    sid = "vmspool:%s:%s" % (chat, q.id)
    name = _fits("Where to answer: ", question_line(q))
    lines = ["The run in this chat waits for your answer to its question %s. "
             "Answer it in any one of these places; the first answer wins, "
             "and each other is told what won." % q.id, ""]
    if dialog:
        lines.append("- In the dialog, while it is on screen (closing it leaves the question open).")
    where = page_of(page, chat)
    if where:
        lines.append("- On the live page: %s" % where)
    line = answer_hint(chat, q)
    lines.append("- On the host: %s%s%s" % ("`", line, "`"))
    return _source(sid, name, "\n".join(lines))


def answered_source(chat, qid, said):
    """The source event that says, under the message, that question qid
    was answered and with what (in a code block: the answer is drawn
    as it was given)."""
    sid = "vmspool:%s:%s:answered" % (chat, qid)
    text = said if said != "" else "(an empty answer)"
    name = _fits("Answered: ", text)
    fence = _fence(text)
    doc = "The run's question %s was answered:\n\n%s\n%s\n%s" % (qid, fence, text, fence)
    return _source(sid, name, doc)


def _source(sid, name, doc):
    # Open WebUI's list of sources shows the name through
    # decodeURIComponent: a "%" is written as "%25" to read as itself.
    name = name.replace("%", "%25")
    return {"type": "source", "data": {"source": {"name": name, "id": sid}, "document": [doc],
                                       "metadata": [{"source": sid, "name": name}]}}


def _not_taken(err):
    """The status of a dialog's answer that spool answer refused as no
    longer wanted: "already answered: TEXT" when another answer won."""
    msg = str(err)
    i = msg.find("already answered: ")
    if i >= 0:
        return _fits("Dialog answer not taken: ", msg[i:])
    return _fits("Dialog answer not taken: ", msg.split(": ", 1)[-1])


# The most of a question a dialog's title shows: Open WebUI draws the
# title whole, wrapped, above the buttons; a longer one would push them
# off the screen. The live page shows any question whole.
DIALOG_TITLE_MAX = 1000


def dialog_event(q, note="", long_hint=True):
    """The __event_call__ that asks q: a confirmation for a yes/no
    question (OK answers yes, Cancel no), else an input (with a select
    list where there are options).

    The run's text (the question, its options) goes only where every
    Open WebUI draws text as text: the dialog's title (and a select
    list's options, and the input's placeholder). Its message is drawn as
    plain text by some versions and as markdown by others (marked, then
    DOMPurify, which keeps images and links): a question's
    `<img src=...>` or `![x](https://...)` there would become an element
    that the person's browser fetches, and no one text reads the same
    both ways. So the message holds only the relay's own words. note is
    why the last answer was not taken, in those words (_refused)."""
    yn = _yes_no(q.options)
    title = question_line(q) if not (q.options and not yn) else q.text + " (" + " / ".join(q.options) + ")"
    cut = len(title) > DIALOG_TITLE_MAX
    if cut:
        title = title[:DIALOG_TITLE_MAX - 1] + "…"
    words = ["The run asks the question above."]
    if cut:
        words.append("It is cut here: read it whole on the live page%s." %
                     (" (its address is under the message)" if long_hint else ""))
    if yn:
        words.append("OK answers %s; Cancel answers %s." % (yn[0].strip(), yn[1].strip()))
    elif q.options:
        words.append("Choose one of its options.")
    else:
        words.append("Type your answer.")
    if q.allow_empty:
        words.append("An empty answer is an answer here.")
    msg = " ".join(words) + note
    if yn:
        return {"type": "confirmation", "data": {"title": title, "message": msg}}
    data = {"title": title, "message": msg, "placeholder": q.options[0] if q.options else "", "value": ""}
    if q.options:
        # A select list in Open WebUI 0.10+; an older one shows a text
        # field, whose answer spool answer checks against the options.
        data["input"] = {"type": "select", "options": list(q.options)}
    return {"type": "input", "data": data}


def _refused(msg):
    """Why spool answer refused an answer, in the relay's own words (a
    dialog's message holds no run text: dialog_event)."""
    if "an empty answer is not taken" in msg:
        why = "an empty answer is not taken (this question needs one)"
    elif "is not one of its options" in msg:
        why = "that is not one of its options"
    elif "more than the" in msg:
        why = "the answer is too long"
    else:
        why = "it does not answer the question"
    return "\n\nNot taken: %s." % why


# How many times a dialog asks again for an answer it could not take.
_ASK_AGAIN = 5


async def relay(chat, job, emit, call=None, *, every=1.0, spool=None, bin_dir=None, url=None, token=None,
                timeout=None, keep=5, title=None, page=None, start_wait=None):
    """Relay chat's run (job) into an Open WebUI chat until it ends, and
    return its outcome: {"job", "state", "exit", "error", "statuses"} (the
    last `keep` statuses). state is "none" when start_wait (seconds) passed
    before any run of the chat showed anything.

    emit is Open WebUI's __event_emitter__: statuses go to it as
    {"type": "status", "data": {"description", "done", "hidden"}}, at most
    one per `every` seconds (the newest winning; one still held when a
    question, an answer or the end comes goes out just before it); a
    question, an answer and the end are never held back, and the last
    status always has "done": true, whatever happens.

    Every status is written for one line (Open WebUI draws a status with
    line-clamp-1): what matters is in its first 60 characters, none is
    longer than STATUS_MAX. A question is said at once, in a status
    ("Waiting for your answer: " and the question, cut) and in a source
    event under the message that names every place to answer, whole (the
    live page `page` for this chat, and the `spool answer` line); call
    (Open WebUI's __event_call__) opens its dialog as a task beside the relay:
    the relay never waits on it, since in the common cases (the tab
    closed, another chat on screen, Escape) it never returns. A yes/no
    question is a confirmation whose Cancel answers no; one with options a
    select list (an input checked against them where Open WebUI has no
    select list); any other an input. What the dialog gets goes to `spool
    answer`, whose rules decide (an empty answer only where the question
    allows it): a refused one is asked again, saying why. When the answer
    comes, from the dialog, the page, the shell or another call of the
    tool, a status and a source say the question was answered and with
    what; the dialog, which stays on the person's screen, is listened to
    until the run ends, and an answer given in it late is told what won.

    title is accepted for callers of an older relay and not used: a
    dialog's title is its question (dialog_event).

    Cancelled (Open WebUI's stop button), it re-raises at once without a
    last status: the caller decides what the stop means (vm_agent asks for
    the job's cancel) and sends the "done" status itself.
    """
    statuses = []
    dialogs = {}  # question id -> its dialog's task
    late = []  # dialogs of questions answered elsewhere, kept until the end
    told = set()  # question ids whose answer was said
    last = {"done": False}

    async def status(text, done=False):
        await emit({"type": "status", "data": {"description": one_line(text, STATUS_MAX), "done": done,
                                               "hidden": False}})
        last["done"] = done

    async def still_open(q, why, detail=""):
        """The question is open and its dialog is gone: where to answer is
        under the message (where_source)."""
        text = _fits("Still waiting for your answer (%s): " % why, question_line(q))
        if detail:
            text += " (%s)" % detail
        await status(text)

    async def source(ev):
        try:
            await emit(ev)
        except asyncio.CancelledError:
            raise
        except Exception:  # an Open WebUI without sources: the statuses still say it
            pass

    async def say_answered(qid, said):
        text = said if said != "" else "(an empty answer)"
        await status(_fits("The question was answered: ", text))
        if qid:
            await source(answered_source(chat, qid, said))

    async def ask(q):
        yn = _yes_no(q.options)
        note = ""
        # A question replayed to a relay that joined late may be answered
        # already (its answer is the next line): no dialog for it.
        try:
            doc = await asyncio.to_thread(current, chat, spool=spool, url=url, token=token)
        except SpoolError:
            doc = None
        open_q = (doc or {}).get("question") if not (doc or {}).get("done") else None
        if not isinstance(open_q, dict) or open_q.get("id") != q.id:
            return
        for _ in range(_ASK_AGAIN):
            try:
                ev = dialog_event(q, note, long_hint=bool(page))
                r = await call(ev)
                if yn:
                    reply = yn[0] if r is True else yn[1] if r is False else None
                else:
                    reply = r if isinstance(r, str) else None
                if reply is None:
                    if isinstance(r, dict) and r.get("error"):
                        await still_open(q, "no dialog", r["error"])
                    elif r is False:
                        await still_open(q, "dialog cancelled")
                    else:
                        await still_open(q, "dialog gave nothing")
                    return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a timeout of the socket layer, or any other
                await still_open(q, "dialog ended", type(e).__name__)
                return
            try:
                await asyncio.to_thread(answer, chat, reply, question=q.id, spool=spool, bin_dir=bin_dir)
                return
            except BadAnswer as e:
                if q.id in told:
                    return  # answered elsewhere meanwhile: its status said with what
                note = _refused(str(e))
                continue
            except NoQuestion as e:
                # The loser of a race (the page, the shell, another
                # dialog answered first) is told what won.
                await status(_not_taken(e))
                return
            except SpoolError as e:
                await status(one_line("Dialog answer not sent: %s" % e, STATUS_MAX))
                return
        await still_open(q, "%d answers refused" % _ASK_AGAIN)

    def drop_dialogs():
        for t in dialogs.values():
            t.cancel()
        dialogs.clear()
        for t in late:
            t.cancel()
        late.clear()

    def keep_late(qid):
        """The dialog of a question answered elsewhere stays on the
        person's screen (nothing closes it): its task is kept until the
        relay ends, so that an answer given in it still gets its status,
        "already answered: TEXT"."""
        t = dialogs.pop(qid, None)
        if t is not None and not t.done():
            late.append(t)

    async def answered_elsewhere():
        try:
            doc = await asyncio.to_thread(current, chat, spool=spool, url=url, token=token)
        except SpoolError:
            return
        if doc is None:
            return  # no document: nothing to judge by
        q = doc.get("question")
        still = {q.get("id")} if isinstance(q, dict) and not doc.get("done") else set()
        for qid in [i for i in dialogs if i not in still]:
            keep_late(qid)
            told.add(qid)
            said = None if url else await asyncio.to_thread(_answer_of, chat, qid, spool)
            if said is None:
                await status("The question was answered.")
            else:
                await say_answered(qid, said)

    outcome = {"job": job, "state": None, "exit": None, "error": None, "statuses": statuses}
    # The throttle: a status goes out at once if none went out in the last
    # `every` seconds, else it is held and the newest held one goes out at
    # the window's end. A question or the end goes out at once, right after
    # what is held: the person sees a short run's last words too.
    held = {"text": None, "task": None, "at": 0.0}
    loop = asyncio.get_running_loop()

    async def flush_later(delay):
        await asyncio.sleep(delay)
        text, held["text"], held["task"] = held["text"], None, None
        if text is not None:
            held["at"] = loop.time()
            await status(text)

    async def throttled(text):
        now = loop.time()
        if not every or now - held["at"] >= every and held["task"] is None:
            held["at"] = now
            await status(text)
            return
        held["text"] = text
        if held["task"] is None:
            held["task"] = asyncio.ensure_future(flush_later(held["at"] + every - now))

    def drop_held():
        if held["task"] is not None:
            held["task"].cancel()
        held["text"], held["task"] = None, None

    async def flush_held():
        text = held["text"]
        drop_held()
        if text is not None:
            await status(text)

    events = afollow(chat, job, url=url, timeout=timeout, spool=spool, bin_dir=bin_dir, token=token)
    try:
        first = True
        while True:
            try:
                if first and start_wait:
                    ev = await asyncio.wait_for(events.__anext__(), start_wait)
                else:
                    ev = await events.__anext__()
            except StopAsyncIteration:
                break
            except asyncio.TimeoutError:
                outcome["state"] = "none"
                await status("No run is going in this chat.", done=True)
                return outcome
            first = False
            if ev.kind == "end":
                await flush_held()
                drop_dialogs()
                outcome.update(job=ev.job or job, state=ev.state, exit=ev.exit, error=ev.error)
                await status(ev.text or "ended", done=True)
                break
            if ev.text:
                statuses.append(ev.text)
                del statuses[:-keep]
            if ev.kind == "question" and ev.question is not None:
                await flush_held()
                held["at"] = loop.time()
                q = ev.question
                for qid in list(dialogs):  # a run asks one question at a time
                    keep_late(qid)
                # One line: that the run waits for the person, and the
                # question, cut; where to answer is under the message.
                await status(_fits("Waiting for your answer: ", question_line(q)))
                await source(where_source(chat, q, page, dialog=call is not None))
                if call is not None:
                    dialogs[q.id] = asyncio.ensure_future(ask(q))
                continue
            if ev.kind == "answer":
                await flush_held()
                held["at"] = loop.time()
                qid = (ev.event or {}).get("id") if isinstance(ev.event, dict) else None
                # Only this question's dialog: spoold may relay an answer
                # after the run asked its next question.
                if qid and qid in dialogs:
                    keep_late(qid)
                elif not qid:
                    for i in list(dialogs):
                        keep_late(i)
                if qid and qid in told:
                    continue
                told.add(qid)
                said = (ev.event or {}).get("text") if isinstance(ev.event, dict) else None
                if said is None:
                    said = ev.text[len("answered: "):] if ev.text.startswith("answered: ") else ev.text
                await say_answered(qid, said)
                continue
            if dialogs:
                # The run went on while a dialog waits: a job that took its
                # answer before spoold relayed it shows no answer event,
                # so the chat's document says whether the question is
                # still open.
                await answered_elsewhere()
            await throttled(ev.text)
        return outcome
    except asyncio.CancelledError:
        last["done"] = True  # the caller says how it ended (relay's doc)
        raise
    finally:
        drop_held()
        drop_dialogs()
        await events.aclose()
        if not last["done"]:
            await status("The relay stopped before the run's end.", done=True)
