"""Typed errors: a closed set of codes, carried in replies as plain data (never pickled).

A server refuses a call by raising a :class:`ClusterFault` (or one of its subclasses below); the
transport carries it to the caller as its code and message, and the caller gets the same class
back. Decisions (retry, restore, resume, give up) are made on :attr:`ClusterFault.code`, never on
the text of a message: messages stay free to say what is wrong and how to fix it, in words.

Every fault is a :class:`ValueError` (what a remote refusal has always been here), so code that
catches ``ValueError`` around a remote call keeps working.

One hierarchy: every error the package raises on purpose is an :class:`Error` with a ``code`` (a
:class:`Code`, or None where none applies: no name server, a launcher's lost host). A refusal from a
server is a :class:`ClusterFault` (and a :class:`ValueError`); what ends a call on the user's side (the
cluster not there, a run that failed) is a :class:`ClusterError` (and a :class:`RuntimeError`), which
keeps the code of the session's failure (:class:`ShardLostError`: ``shard_lost``).

Codes
-----
``bad_request``
    A malformed message or argument: a bug or an attack, not a state of the cluster.
``forbidden``
    Not this session's token, or not the caller's own name.
``version_mismatch``
    The peer runs other versions of gensim or of this package.
``unknown_member``
    The dispatcher does not know the worker or shard (never said hello, or dropped): say hello.
``not_in_session``
    The worker is not a member of the session: join it first.
``member_conflict``
    Another live process holds that member's name.
``full``
    A limit is reached (members, memory, queue): try later, or elsewhere.
``session_closed``
    No such session here (closed, aborted, replaced, or the server restarted).
``no_shard``
    No parameter shard is registered: start one.
``shard_lost``
    A shard of the session was lost: the session cannot go on (resume from a checkpoint).
``no_workers``
    No worker joined, or every worker quit.
``workers_dropped``
    Every worker of the session was dropped from the cluster meanwhile (frozen or cut off past the
    heartbeat): they rejoin by themselves; resume from a checkpoint.
``poisoned``
    A merge's values are beyond the session's bound (a worker's replica diverged, or it is hostile).
``no_checkpoint``
    Resume asked, and there is nothing to resume from (no usable checkpoint, or the run finished).
``other_run``
    A checkpoint is of another run (another corpus, vocabulary or settings).
``checkpoint_unreadable``
    A checkpoint exists but cannot be read back whole (missing, altered or malformed files).
``restore_failed``
    A shard could not restore its rows from the checkpoint named.
``corpus_file``
    A worker does not see the client's corpus file as the client does.
``internal``
    Anything else: a bug; the message says what happened.
"""
import enum

__all__ = ["Error", "Code", "ClusterFault", "BadRequest", "Forbidden", "VersionMismatch", "UnknownMember", "NotInSession",
           "MemberConflict", "Full", "SessionClosed", "NoShard", "ShardLost", "NoWorkers", "WorkersDropped", "Poisoned",
           "NoCheckpoint", "OtherRun", "CheckpointUnreadable", "RestoreFailed", "CorpusFileMismatch", "Busy",
           "Internal",
           "ClusterError", "ShardLostError", "FAULT_CLASS", "dict_to_fault", "fault", "fault_to_dict", "to_wire", "from_wire"]

MAX_MESSAGE = 4000  # characters of a fault's message that travel


class Error(Exception):
    """Every error the package raises on purpose; ``code`` (a :class:`Code`, or None) is what code decides on."""

    code = None


class ClusterError(Error, RuntimeError):
    """The cluster is not there, not reachable, or refused us, or a run failed: the message says which and
    what to do; ``code`` the session's failure's (:class:`Code`), None when there was no session to fail.

    Parameters
    ----------
    message : str
        What is wrong and how to fix it, in words.
    code : Code or str, optional
        The failure's code.
    """

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = Code(code)

    def __reduce__(self):  # copy/deepcopy keep the code
        return type(self), (str(self), self.code)


class Code(str, enum.Enum):
    """The closed set of error codes (see the module's docstring)."""

    BAD_REQUEST = "bad_request"
    FORBIDDEN = "forbidden"
    VERSION_MISMATCH = "version_mismatch"
    UNKNOWN_MEMBER = "unknown_member"
    NOT_IN_SESSION = "not_in_session"
    MEMBER_CONFLICT = "member_conflict"
    FULL = "full"
    SESSION_CLOSED = "session_closed"
    NO_SHARD = "no_shard"
    SHARD_LOST = "shard_lost"
    NO_WORKERS = "no_workers"
    WORKERS_DROPPED = "workers_dropped"
    POISONED = "poisoned"
    NO_CHECKPOINT = "no_checkpoint"
    OTHER_RUN = "other_run"
    CHECKPOINT_UNREADABLE = "checkpoint_unreadable"
    RESTORE_FAILED = "restore_failed"
    CORPUS_FILE = "corpus_file"
    BUSY = "busy"
    INTERNAL = "internal"


class ShardLostError(ClusterError):
    """A parameter shard of the session is lost (it does not answer, or the dispatcher lost it): the
    session cannot go on (with checkpoints, ``train()`` resumes from the last one)."""

    code = Code.SHARD_LOST


class ClusterFault(Error, ValueError):
    """A refusal or failure with a :class:`Code`; subclasses fix the code.

    Parameters
    ----------
    message : str
        What is wrong and how to fix it, in words.
    code : Code or str, optional
        Only for this base class (a subclass has its own).
    """

    CODE = Code.INTERNAL

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = Code(code) if code is not None else self.CODE

    def __reduce__(self):  # copy/deepcopy keep the code (never used to pickle for a peer)
        return fault, (self.code.value, str(self))


def _subclass(name, code, doc):
    return type(name, (ClusterFault,), {"CODE": code, "__doc__": doc, "__module__": __name__})


BadRequest = _subclass("BadRequest", Code.BAD_REQUEST, "A malformed message or argument.")
Forbidden = _subclass("Forbidden", Code.FORBIDDEN, "Not this session's token, or not the caller's own name.")
VersionMismatch = _subclass("VersionMismatch", Code.VERSION_MISMATCH, "The peer runs other versions.")
UnknownMember = _subclass("UnknownMember", Code.UNKNOWN_MEMBER, "The dispatcher does not know the member.")
NotInSession = _subclass("NotInSession", Code.NOT_IN_SESSION, "The worker is not a member of the session.")
MemberConflict = _subclass("MemberConflict", Code.MEMBER_CONFLICT, "Another live process holds that name.")
Full = _subclass("Full", Code.FULL, "A limit is reached (members, memory, queue).")
SessionClosed = _subclass("SessionClosed", Code.SESSION_CLOSED, "No such session here.")
NoShard = _subclass("NoShard", Code.NO_SHARD, "No parameter shard is registered.")
ShardLost = _subclass("ShardLost", Code.SHARD_LOST, "A shard of the session was lost.")
NoWorkers = _subclass("NoWorkers", Code.NO_WORKERS, "No worker joined, or every worker quit.")
WorkersDropped = _subclass("WorkersDropped", Code.WORKERS_DROPPED,
                           "Every worker of the session was dropped from the cluster meanwhile.")
Poisoned = _subclass("Poisoned", Code.POISONED, "A merge's values are beyond the session's bound.")
NoCheckpoint = _subclass("NoCheckpoint", Code.NO_CHECKPOINT, "Nothing to resume from.")
OtherRun = _subclass("OtherRun", Code.OTHER_RUN, "A checkpoint is of another run.")
CheckpointUnreadable = _subclass("CheckpointUnreadable", Code.CHECKPOINT_UNREADABLE,
                                 "A checkpoint cannot be read back whole.")
RestoreFailed = _subclass("RestoreFailed", Code.RESTORE_FAILED, "A shard could not restore its rows.")
CorpusFileMismatch = _subclass("CorpusFileMismatch", Code.CORPUS_FILE,
                               "A worker does not see the client's corpus file.")
Busy = _subclass("Busy", Code.BUSY, "The dispatcher runs another session (of another call, or of this run).")
Internal = _subclass("Internal", Code.INTERNAL, "Anything else: a bug.")

_BY_CODE = {cls.CODE: cls for cls in (BadRequest, Forbidden, VersionMismatch, UnknownMember, NotInSession,
                                      MemberConflict, Full, SessionClosed, NoShard, ShardLost, NoWorkers,
                                      WorkersDropped, Poisoned,
                                      NoCheckpoint, OtherRun, CheckpointUnreadable, RestoreFailed,
                                      CorpusFileMismatch, Busy, Internal)}
assert set(_BY_CODE) == set(Code), "every code has its class"


def fault(code, message):
    """The :class:`ClusterFault` subclass of ``code`` (a :class:`Code` or its value) with ``message``;
    an unknown code gives an :class:`Internal` fault naming it."""
    try:
        code = Code(code)
    except ValueError:
        return Internal(f"unknown error code {str(code)[:40]!r}: {str(message)[:MAX_MESSAGE]}")
    return _BY_CODE[code](str(message)[:MAX_MESSAGE])


def to_wire(err):
    """A fault as plain data: ``{"code": str, "message": str}``."""
    return {"code": err.code.value, "message": str(err)[:MAX_MESSAGE]}


def from_wire(msg):
    """:func:`to_wire`'s dict (from a peer) back as its fault; a malformed one is an :class:`Internal` fault."""
    if not isinstance(msg, dict) or not isinstance(msg.get("code"), str) or not isinstance(msg.get("message"), str):
        return Internal(f"a malformed error reply: {str(msg)[:200]}")
    return fault(msg["code"], msg["message"])


# On the wire a fault is a dict that names it as this class (the transport's serializer registers the
# two functions below for our fault classes only): ``{"__class__": FAULT_CLASS, "code", "message"}``.
FAULT_CLASS = "gensim_distw2v.fault"


def fault_to_dict(err):
    """A :class:`ClusterFault` as the serializer's dict."""
    return dict(to_wire(err), __class__=FAULT_CLASS)


def dict_to_fault(_classname, data):
    """The serializer's dict (from a peer) back as its fault (see :func:`from_wire`)."""
    return from_wire({"code": data.get("code"), "message": data.get("message")})
