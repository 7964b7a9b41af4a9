"""The member side of the cluster's membership: what a worker and a parameter shard do alike to
stay in it. Find the dispatcher in the name server, say hello, keep a heartbeat going (a long
poll the dispatcher answers once the session the member should be in changes), say hello again
when the dispatcher asks or was lost, and leave when stopped.

:class:`Member` is the base of :class:`gensim_distw2v.worker.service.Worker` and
:class:`gensim_distw2v.shard.service.Shard`: they say what their hello and heartbeat carry and
what they do with a reply; the dispatcher's side is :mod:`gensim_distw2v.dispatcher.membership`.
"""
import logging

from gensim_distw2v import protocol
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.protocol.constants import DISPATCHER_NAME
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.protocol import tables
from gensim_distw2v.versions import versions

logger = logging.getLogger(__name__)

__all__ = ["Member", "OPS"]

OPS = {"worker": ("hello", "heartbeat", "leave"), "shard": ("shard_hello", "shard_beat", "shard_leave")}
LOG_EVERY = 30  # seconds between "waiting for the dispatcher" lines while it is not there
GOODBYE_TIMEOUT = 2.0  # seconds the goodbye on stop may take (a dispatcher that is gone must not hold a stop up)


class Member:
    """A worker's or a shard's membership (see the module's docstring).

    Subclasses set :attr:`ROLE` and, before :meth:`heartbeat_loop` runs, the attributes ``name``,
    ``uri`` (where it is served), ``ns_conf``, ``hmac_key``, ``heartbeat_every`` (seconds, at most
    :data:`gensim_distw2v.protocol.LONG_POLL`), ``stopped`` (a :class:`threading.Event`) and
    ``meter`` (its :class:`gensim_distw2v.io.meter.Meter`); they override the hooks below.
    """

    ROLE = None  # "worker" or "shard"
    dispatcher_uri = None  # the dispatcher's URI once found
    secret = ""  # the dispatcher's answer to its last hello: its calls naming it carry it

    # ------------------------------------------------------------------ hooks
    def hello_request(self):
        """What its hello says (a :class:`gensim_distw2v.protocol.Hello`; a worker adds its threads)."""
        return protocol.Hello(name=self.name, uri=self.uri, versions=versions())

    def beat_request(self):
        """Its next heartbeat (a :class:`gensim_distw2v.protocol.Heartbeat`)."""
        return protocol.Heartbeat(name=self.name, wait=self.heartbeat_every, metrics=self.metrics(), secret=self.secret)

    def found(self, uri):
        """The dispatcher at ``uri`` took its hello."""
        self.dispatcher_uri = uri

    def on_beat(self, link, request, reply):
        """Act on the dispatcher's reply to ``request`` (it raises :data:`transport.PyroError` if the
        dispatcher is lost meanwhile)."""

    def lost(self, asked):
        """The dispatcher is lost (``asked``: False), or asked for a new hello (True)."""

    def metrics(self):
        """Its :class:`gensim_distw2v.protocol.NodeMetrics`: of the session it is in
        (:meth:`session_metrics`), or since the last one."""
        metrics = self.session_metrics()
        return self.meter.sample() if metrics is None else metrics

    def session_metrics(self):
        """Its metrics in the session it is in now, or None (none, or its meter is not marked for it)."""
        return None

    # ------------------------------------------------------------------ the loop
    def connect(self):
        """Find the dispatcher and say hello; retry every second until it works or ``stopped``
        is set (then None). Returns the :class:`gensim_distw2v.io.endpoints.Link`."""
        waited = 0
        while not self.stopped.is_set():
            try:
                uri = transport.lookup(self.ns_conf, DISPATCHER_NAME)
                if uri:
                    link = endpoints.link(uri, tables.DISPATCHER, self.hmac_key, timeout=30.0)
                    try:
                        self.secret = link.call(OPS[self.ROLE][0], self.hello_request())
                    except BaseException:
                        link.release()
                        raise
                    self.found(uri)
                    logger.info("found the dispatcher at %s", uri)
                    return link
            except ValueError as err:  # refused (a version mismatch, say): say so, keep trying
                logger.error("the dispatcher refused this %s: %s", self.ROLE, err)
            except (ClusterError, transport.PyroError) as err:
                if waited % LOG_EVERY == 0:
                    logger.info("waiting for the dispatcher (%s)", err)
            if waited == 0:
                logger.info("waiting for a dispatcher to register as %s", DISPATCHER_NAME)
            self.stopped.wait(1.0)
            waited += 1
        return None

    def stop(self):
        """Set ``stopped`` and say goodbye at once, on a connection of its own: the dispatcher
        drops this member, which ends the heartbeat's long poll now rather than when its wait is
        over, so :meth:`heartbeat_loop` returns at once. Quietly nothing more where the dispatcher
        is not known or does not answer (the loop then ends when its call does)."""
        self.stopped.set()
        uri = self.dispatcher_uri
        if uri is None:
            return
        try:
            link = endpoints.link(uri, tables.DISPATCHER, self.hmac_key, timeout=GOODBYE_TIMEOUT)
            try:
                link.call(OPS[self.ROLE][2], name=self.name, secret=self.secret)
            finally:
                link.release()
        except (ClusterError, transport.PyroError, ValueError, OSError) as err:
            logger.debug("no goodbye to the dispatcher at %s (%s)", uri, err)

    def heartbeat_loop(self):
        """Keep in touch with the dispatcher until ``stopped`` is set (see :meth:`stop`), then leave."""
        link = None
        beat_op = OPS[self.ROLE][1]
        while not self.stopped.is_set():
            if link is None:
                link = self.connect()
                if link is None:
                    return
            request = self.beat_request()
            try:
                reply = link.call(beat_op, request)
            except (transport.PyroError, ValueError) as err:
                logger.warning("lost the dispatcher (%s); looking for it again", err)
                link = self._drop(link, asked=False)
                continue
            if reply.hello:
                link = self._drop(link, asked=True)
                continue
            try:
                self.on_beat(link, request, reply)
            except transport.PyroError as err:
                logger.warning("lost the dispatcher (%s); looking for it again", err)
                link = self._drop(link, asked=False)
        if link is not None:
            try:
                link.call(OPS[self.ROLE][2], name=self.name, secret=self.secret)
            except (transport.PyroError, ValueError):
                pass
            link.release()

    def _drop(self, link, asked):
        link.release()
        self.lost(asked)
        return None
