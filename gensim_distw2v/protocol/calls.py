"""Call tables: each server's remote calls in one table, each call one typed request record.

A server's table maps an operation's name to a :class:`Call`: the request record it takes, the
name of the server object's method that handles it, and what it answers (a reply record, a plain
type, or None). The transport serves a table through one remote method, ``call(op, msg)``
(:func:`gensim_distw2v.io.endpoints.endpoint`), and gives the caller a link whose
``call(op, request)`` sends a request record and returns the reply, checked
(:func:`gensim_distw2v.io.endpoints.link`). Modelled on dask.distributed's handler tables.

On the server, :class:`Handlers` checks each message with the request record's ``from_wire``
(a malformed one is refused as :class:`~gensim_distw2v.protocol.errors.BadRequest`), checks the
caller's credential by the call's ``auth`` (the server's guard of that kind: no handler checks a
secret itself), runs the handler with the record, and sends the reply's ``to_wire()``. A handler refuses a call by
raising
a :class:`~gensim_distw2v.protocol.errors.ClusterFault`: it reaches the caller as the same class,
code and message (as plain data). Any other ``ValueError`` reaches the caller as a ``ValueError``.

No threads, no disk, no sockets: this module is the protocol; the transport moves it.
"""
import dataclasses
import operator
import typing

from gensim_distw2v.protocol.errors import BadRequest, ClusterFault
from gensim_distw2v.protocol.records import Record

__all__ = ["AUTHS", "CADENCES", "Call", "Table", "Handlers", "Caller"]

#: who may make a call, and the credential its request carries (the field named): :class:`Handlers` has
#: the server's guard of that kind check it against the server's state (the session, the member, the
#: count) in constant time before the handler runs
AUTHS = {
    "none": None,  # any peer on the link (itself keyed beyond loopback: HMAC)
    "member": "secret",  # a registered worker or shard, for its own name (the secret its hello's reply gave)
    "owner": "token",  # the session's client (its owner secret)
    "watcher": "token",  # any peer; the session's client if it shows its owner secret (checked when given)
    "grant": "owner",  # the client at the shard the dispatcher granted it to (a capability whose digest it told it)
    "capability": "token",  # the session's client at one shard (that shard's capability of the owner secret)
    "token": "token",  # the session's client and its workers (the session token)
    "count": "token",  # a vocabulary count's client (the count's secret, or at the dispatcher its lease)
    "count_grant": "token",  # a count's client at a shard the lease names (the secret whose digest the lease told it)
    "range": "token",  # a worker counting a range it was given (that range's token)
    "lease": "count",  # the dispatcher's lease (the count named is the one its heartbeats lease)
}
#: how often a call comes (the projection's session and per-second calls are read from these)
CADENCES = (
    "word",  # with the trained words: per job, round or range
    "epoch",  # once or a few times an epoch
    "session",  # once or a few times a session (its set-up, a worker's joining, its end)
    "second",  # a few times a second from each member or client, whatever the speed
    "rare",  # on an event: a checkpoint, a member's leaving, a failure
    "count",  # the vocabulary count's (before training)
)


@dataclasses.dataclass(frozen=True)
class Call:
    """One remote call of a server.

    Parameters
    ----------
    op : str
        The operation's name (what a caller names).
    request : type
        The :class:`~gensim_distw2v.protocol.records.Record` subclass the call takes.
    handler : str
        The name of the server object's method that handles it (called with the request record);
        a dotted name names a method of one of its parts (``"clients.open_session"``).
    reply : type or None
        A :class:`~gensim_distw2v.protocol.records.Record` subclass (the handler returns one; the
        caller gets it back checked), a plain type (``int``, ``bool``, ``dict``: the handler's
        value travels as is, the caller checks its type), or None (the call answers nothing).
    doc : str
        One line: what the call does (the design document's call table shows it).
    auth : str
        Who may make it (a key of :data:`AUTHS`); the request record has the field of its credential.
    cadence : str
        How often it comes (one of :data:`CADENCES`).
    bulk : bool
        Also served on a shard's bulk channel (:mod:`gensim_distw2v.io.channel`), raw buffers beside Pyro4.
    """

    op: str
    request: type
    handler: str
    reply: typing.Optional[type]
    doc: str = ""
    auth: str = "none"
    cadence: str = "word"
    bulk: bool = False

    def __post_init__(self):
        if not (isinstance(self.request, type) and issubclass(self.request, Record)):
            raise TypeError(f"call {self.op}: the request must be a Record subclass, got {self.request!r}")
        if self.reply is not None and not isinstance(self.reply, type):
            raise TypeError(f"call {self.op}: the reply must be a type or None, got {self.reply!r}")
        if self.auth not in AUTHS:
            raise ValueError(f"call {self.op}: auth must be one of {', '.join(AUTHS)}, got {self.auth!r}")
        if self.cadence not in CADENCES:
            raise ValueError(f"call {self.op}: cadence must be one of {', '.join(CADENCES)}, got {self.cadence!r}")
        credential = AUTHS[self.auth]
        if credential is not None and credential not in {f.name for f in dataclasses.fields(self.request)}:
            raise TypeError(f"call {self.op}: its request {self.request.__name__} has no field {credential!r}, "
                            f"the credential of auth {self.auth!r}")

    def check_reply(self, value):
        """A reply from the server, checked: the reply record, the plain value, or None.

        Raises
        ------
        ValueError
            The reply is not what the call answers.
        """
        reply = self.reply
        if reply is None:
            if value is not None:
                raise ValueError(f"malformed {self.op} reply: expected nothing, got {type(value).__name__}")
            return None
        if issubclass(reply, Record):
            return reply.from_wire(value)
        if not isinstance(value, reply) or (reply is int and isinstance(value, bool)):
            raise ValueError(f"malformed {self.op} reply: expected {reply.__name__}, got {type(value).__name__}")
        return value


class Table:
    """A server's remote calls, by operation name.

    Parameters
    ----------
    server : str
        What serves it (``dispatcher``, ``shard``, ``worker``), for messages.
    calls : iterable of Call
    """

    def __init__(self, server, calls):
        self.server = server
        self.calls = {}
        for call in calls:
            if call.op in self.calls:
                raise ValueError(f"{server} table: operation {call.op!r} defined twice")
            self.calls[call.op] = call

    def __getitem__(self, op):
        return self.calls[op]

    def __iter__(self):
        return iter(self.calls.values())

    def __len__(self):
        return len(self.calls)

    def __contains__(self, op):
        return op in self.calls

    def ops(self, cadence=None, bulk=None):
        """The operations' names, in the table's order: those of ``cadence`` (a name or a tuple of them)
        and, with ``bulk``, those served (or not) on the bulk channel."""
        cadences = (cadence,) if isinstance(cadence, str) else cadence
        return [op for op, call in self.calls.items() if (cadences is None or call.cadence in cadences)
                and (bulk is None or call.bulk == bulk)]

    def request(self, op, **fields):
        """The request record of ``op`` built from ``fields`` (a caller's shorthand)."""
        return self.calls[op].request(**fields)


class Handlers:
    """The server side of a table for one object: ``handle(op, msg)`` checks ``msg``, has the
    object's guard of the call's ``auth`` check the caller's credential, runs the handler and
    returns the reply as plain data (bound methods, guards and checks resolved once here: a call
    costs a dict look-up, the request's ``from_wire`` and its guard beyond the handler itself).

    Parameters
    ----------
    table : Table
    obj : object
        Has a method named by each call's ``handler`` and, if any call's ``auth`` is not ``"none"``,
        a method ``guards()`` returning ``{auth: guard}`` for each of those: ``guard(request, op)``
        raises :class:`~gensim_distw2v.protocol.errors.Forbidden` (or another
        :class:`~gensim_distw2v.protocol.errors.ClusterFault`) unless the request's credential is
        right. A guard may let a request pass that names what the server does not hold (no session,
        no member of that name): its handler refuses that, and can do nothing for it.

    Raises
    ------
    TypeError
        A call without its handler, or whose ``auth`` no guard of the object checks.
    """

    def __init__(self, table, obj):
        self.table = table
        self._ops = {}
        guards = obj.guards() if callable(getattr(obj, "guards", None)) else {}
        for call in table:
            try:  # a dotted name: a method of one of the object's parts
                handler = operator.attrgetter(call.handler)(obj)
            except AttributeError:
                handler = None
            if not callable(handler):
                raise TypeError(f"{type(obj).__name__} has no handler {call.handler!r} for {table.server} call {call.op!r}")
            guard = None
            if call.auth != "none":
                guard = guards.get(call.auth)
                if not callable(guard):
                    raise TypeError(f"{type(obj).__name__} has no guard for auth {call.auth!r} of {table.server} call "
                                    f"{call.op!r}: its guards() must check that credential")
            record_reply = call.reply is not None and issubclass(call.reply, Record)
            self._ops[call.op] = (call.request.from_wire, guard, handler, record_reply)

    def handle(self, op, msg):
        """Run call ``op`` with the message ``msg`` (plain data from a peer).

        Raises
        ------
        BadRequest
            No such call, or a malformed request.
        Forbidden
            The request does not carry the credential its call's ``auth`` asks for.
        ClusterFault
            What the handler refused.
        """
        entry = self._ops.get(op) if isinstance(op, str) else None
        if entry is None:
            raise BadRequest(f"the {self.table.server} has no call {str(op)[:80]!r}; its calls: "
                             f"{', '.join(self.table.ops())}")
        from_wire, guard, handler, record_reply = entry
        try:
            request = from_wire(msg)
        except ClusterFault:
            raise
        except (ValueError, TypeError) as err:
            raise BadRequest(str(err)) from None  # the record names the message and the field
        if guard is not None:
            guard(request, op)
        reply = handler(request)
        return reply.to_wire() if record_reply and reply is not None else reply


class Caller:
    """The caller's side of a table: typed requests in, checked replies out.

    Parameters
    ----------
    table : Table
    send : callable
        ``send(op, msg)``: the transport's remote ``call`` (returns the reply as plain data, raises
        what the server raised).
    """

    def __init__(self, table, send):
        self.table, self._send = table, send

    def call(self, op, request=None, /, **fields):
        """Call ``op`` with ``request`` (its request record), or with the record built from
        ``fields``; returns the reply checked (:meth:`Call.check_reply`).

        Raises
        ------
        ClusterFault
            The server refused the call (the same class, code and message as it raised).
        ValueError
            The server refused it otherwise, or its reply is malformed.
        """
        spec = self.table.calls[op]
        if request is None:
            request = spec.request(**fields)
        elif fields or type(request) is not spec.request:
            raise TypeError(f"{op} takes one {spec.request.__name__} (or its fields as keywords)")
        return spec.check_reply(self._send(op, request.to_wire()))

    def send(self, op, msg):
        """Send ``msg`` (plain data, unchecked) as call ``op`` and return the reply unchecked: for
        tests and probes that send what no well-behaved caller would."""
        return self._send(op, msg)
