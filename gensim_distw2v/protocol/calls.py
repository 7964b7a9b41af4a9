"""Call tables: each server's remote calls in one table, each call one typed request record.

A server's table maps an operation's name to a :class:`Call`: the request record it takes, the
name of the server object's method that handles it, and what it answers (a reply record, a plain
type, or None). The transport serves a table through one remote method, ``call(op, msg)``
(:func:`gensim_distw2v.io.endpoints.endpoint`), and gives the caller a link whose
``call(op, request)`` sends a request record and returns the reply, checked
(:func:`gensim_distw2v.io.endpoints.link`). Modelled on dask.distributed's handler tables.

On the server, :class:`Handlers` checks each message with the request record's ``from_wire``
(a malformed one is refused as :class:`~gensim_distw2v.protocol.errors.BadRequest`), runs the
handler with the record, and sends the reply's ``to_wire()``. A handler refuses a call by raising
a :class:`~gensim_distw2v.protocol.errors.ClusterFault`: it reaches the caller as the same class,
code and message (as plain data). Any other ``ValueError`` reaches the caller as a ``ValueError``.

No threads, no disk, no sockets: this module is the protocol; the transport moves it.
"""
import dataclasses
import operator
import typing

from gensim_distw2v.protocol.errors import BadRequest, ClusterFault
from gensim_distw2v.protocol.records import Record

__all__ = ["Call", "Table", "Handlers", "Caller"]


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
    """

    op: str
    request: type
    handler: str
    reply: typing.Optional[type]
    doc: str = ""

    def __post_init__(self):
        if not (isinstance(self.request, type) and issubclass(self.request, Record)):
            raise TypeError(f"call {self.op}: the request must be a Record subclass, got {self.request!r}")
        if self.reply is not None and not isinstance(self.reply, type):
            raise TypeError(f"call {self.op}: the reply must be a type or None, got {self.reply!r}")

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

    def ops(self):
        """The operations' names, in the table's order."""
        return list(self.calls)

    def request(self, op, **fields):
        """The request record of ``op`` built from ``fields`` (a caller's shorthand)."""
        return self.calls[op].request(**fields)


class Handlers:
    """The server side of a table for one object: ``handle(op, msg)`` checks ``msg``, runs the
    handler and returns the reply as plain data (bound methods and checks resolved once here: a
    call costs a dict look-up and the request's ``from_wire`` beyond the handler itself).

    Parameters
    ----------
    table : Table
    obj : object
        Has a method named by each call's ``handler``.
    """

    def __init__(self, table, obj):
        self.table = table
        self._ops = {}
        for call in table:
            try:  # a dotted name: a method of one of the object's parts
                handler = operator.attrgetter(call.handler)(obj)
            except AttributeError:
                handler = None
            if not callable(handler):
                raise TypeError(f"{type(obj).__name__} has no handler {call.handler!r} for {table.server} call {call.op!r}")
            record_reply = call.reply is not None and issubclass(call.reply, Record)
            self._ops[call.op] = (call.request.from_wire, handler, record_reply)

    def handle(self, op, msg):
        """Run call ``op`` with the message ``msg`` (plain data from a peer).

        Raises
        ------
        BadRequest
            No such call, or a malformed request.
        ClusterFault
            What the handler refused.
        """
        entry = self._ops.get(op) if isinstance(op, str) else None
        if entry is None:
            raise BadRequest(f"the {self.table.server} has no call {str(op)[:80]!r}; its calls: "
                             f"{', '.join(self.table.ops())}")
        from_wire, handler, record_reply = entry
        try:
            request = from_wire(msg)
        except ClusterFault:
            raise
        except (ValueError, TypeError) as err:
            raise BadRequest(str(err)) from None  # the record names the message and the field
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
