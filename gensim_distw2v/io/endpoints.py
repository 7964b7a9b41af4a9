"""A server's call table on the wire: the object a daemon serves for it (:class:`Endpoint`, one remote
method ``call(op, msg)``) and a caller's typed link to it (:class:`Link`), both over
:mod:`gensim_distw2v.io.transport` (which alone touches Pyro4).
"""
import time

from gensim_distw2v.io import transport
from gensim_distw2v.io.meter import CALLS
from gensim_distw2v.protocol import calls

__all__ = ["Endpoint", "Link", "endpoint", "link"]


@transport.expose
class Endpoint:
    """What a daemon serves for a call table: one remote method, ``call(op, msg)``; each call of
    the table is counted in :data:`gensim_distw2v.io.meter.CALLS` (its handling here, the whole call
    by the transport)."""

    def __init__(self, handlers):
        self._handle = handlers.handle
        self._ops = frozenset(handlers.table.ops())

    def call(self, op, msg):
        """Run call ``op`` of the table with its request message ``msg``."""
        counted = isinstance(op, str) and op in self._ops  # a peer's unknown op is refused, not counted
        if counted:
            CALLS.name(op)
        else:
            CALLS.forget()
        began = time.thread_time()
        try:
            return self._handle(op, msg)
        finally:
            if counted:
                CALLS.add(op, time.thread_time() - began)


def endpoint(table, obj):
    """The object to serve (:class:`gensim_distw2v.io.transport.Server`) for ``obj``'s calls in ``table`` (a
    :class:`gensim_distw2v.protocol.calls.Table`)."""
    return Endpoint(calls.Handlers(table, obj))


class Link(calls.Caller):
    """A caller's link to one server's call table over one msgpack proxy (one thread at a time):
    ``link.call(op, request)``; see :class:`gensim_distw2v.protocol.calls.Caller`.

    Parameters
    ----------
    uri : str
    table : gensim_distw2v.protocol.calls.Table
    hmac_key : bytes or str, optional
    timeout : float, optional
        Seconds a call may take (None: no limit).
    """

    def __init__(self, uri, table, hmac_key=None, timeout=None):
        self.proxy = transport.connect(uri, hmac_key, timeout)
        super().__init__(table, self._call)

    def _call(self, op, msg):
        return self.proxy.call(op, msg)  # (looked up per call: the proxy connects on first use)

    @property
    def timeout(self):
        """Seconds a call may take (None: no limit); settable."""
        return transport.timeout_of(self.proxy)

    @timeout.setter
    def timeout(self, seconds):
        transport.set_timeout(self.proxy, seconds)

    @property
    def connection(self):
        """The underlying proxy (for :func:`gensim_distw2v.io.transport.release` and tests of the raw transport)."""
        return self.proxy

    def bind(self):
        """Connect now (rather than at the first call); raises :data:`gensim_distw2v.io.transport.CommunicationError` if it cannot."""
        transport.bind(self.proxy)

    def release(self):
        """Close the connection (harmless if it is already closed)."""
        transport.release(self.proxy)


def link(uri, table, hmac_key=None, timeout=None):
    """A :class:`Link` to the server at ``uri`` that serves ``table``."""
    return Link(uri, table, hmac_key, timeout)
