"""Links to a session's parameter shards: one connection each, calls to all of them at once.

The client (opening a session, downloading the weights) and every worker (its weights at a join,
its merge rounds) talk to all of a session's shards in parallel; a shard that does not answer
raises :class:`gensim_distw2v.protocol.errors.ShardLost`, naming it and the command that restarts
it. A worker's merges go by each shard's bulk channel (:mod:`gensim_distw2v.io.channel`) where the
shard has one, else by Pyro4 like every other call.
"""
import concurrent.futures
import logging
import time

from gensim_distw2v.io import channel, endpoints, keys, transport
from gensim_distw2v.protocol import tables
from gensim_distw2v.protocol.errors import ShardLost

logger = logging.getLogger(__name__)

__all__ = ["InFlight", "ShardLinks", "RESTART"]

# what a lost shard's message says to do, after naming it ({host}, {port}: the name server's)
RESTART = "restart it with: python -m gensim_distw2v.shard --ns-host {host} --ns-port {port}"
CLOSE_TIMEOUT = 5.0  # seconds a session's close may take on a shard (best effort)


class ShardLinks:
    """Connections to a session's shards, and calls to one or to all of them.

    Parameters
    ----------
    shards : list of (str, str)
        ``[name, uri]`` of each shard, in the session's order.
    hmac_key : bytes, optional
        The cluster's key.
    ns_conf : dict
        Where the name server is (for the restart command in errors).
    token : str
        The session's secret (:class:`gensim_distw2v.protocol.Opened`), for the calls that need it.
    timeout : float
        Seconds a call may take.
    bulk : iterable of str
        Calls that go by a shard's bulk channel where it has one (a worker's: ``merge``); the
        channel is asked for and connected by :meth:`open_channels`, or at the first such call.
    close_tokens : list of str, optional
        Per shard, what :meth:`close` shows it (the client's: each shard's capability), else ``token``.

    Attributes
    ----------
    ADVICE : str
        What a lost shard's message says to do (``{host}`` and ``{port}`` are filled in).
    LOST : type
        What a lost shard raises (an exception taking the message).
    """

    ADVICE = RESTART
    LOST = ShardLost

    def __init__(self, shards, hmac_key, ns_conf, token, timeout=60.0, bulk=(), close_tokens=None):
        self.shards, self.ns_conf, self.token = [tuple(s) for s in shards], ns_conf, token
        self.close_tokens = close_tokens  # per shard, what close() shows it (else the token)
        self.links = [endpoints.link(uri, tables.SHARD, hmac_key, timeout=timeout) for _name, uri in self.shards]
        self.bulk, self.hmac_key, self.timeout = frozenset(bulk), hmac_key, timeout
        self.channels = [None] * len(self.shards)  # per shard: its channel link, False (none), None (not asked)
        # one shard: its calls run in the caller's thread (no hand-over per merge round)
        self.pool = concurrent.futures.ThreadPoolExecutor(len(self.shards), thread_name_prefix="shard-link") \
            if len(self.shards) > 1 else None

    def __len__(self):
        return len(self.shards)

    def open_channels(self):
        """Ask every shard for its bulk channel and connect it now (a worker, at its join: a cost per
        session, not its first merge round's); a shard without one, or whose channel cannot be
        reached, gets its bulk calls by Pyro4, as at a first call.

        Raises
        ------
        gensim_distw2v.protocol.errors.ShardLost
            A shard does not answer.
        """
        if self.bulk:
            for shard in range(len(self.shards)):
                self._checked_channel(shard)

    def call(self, shard, op, request=None, /, **fields):
        """Call ``op`` (:data:`gensim_distw2v.protocol.tables.SHARD`) on shard ``shard`` with its
        request record (or the record's fields as keywords); returns the reply, checked.

        Raises
        ------
        gensim_distw2v.protocol.errors.ShardLost
            The shard does not answer (its name, address, what happened and how to restart it;
            :attr:`LOST`).
        """
        try:
            if op in self.bulk:
                bulk = self._channel(shard)
                if bulk:
                    return bulk.call(op, request, **fields)
            return self.links[shard].call(op, request, **fields)
        except (transport.PyroError, channel.LinkBroken) as err:
            raise self._lost(shard, err) from None

    def call_all(self, op, requests):
        """``op`` on every shard with its request record (``requests[shard]``), at once; returns
        ``(replies, CPU seconds of the pool's threads)``: :meth:`start_all`'s, waited for.

        Raises
        ------
        gensim_distw2v.protocol.errors.ShardLost
            A shard does not answer (:meth:`call`'s).
        """
        return self.start_all(op, requests).result()

    def start_all(self, op, requests):
        """Start ``op`` on every shard with its request record (``requests[shard]``) and return at
        once: the :class:`InFlight` calls, whose ``result()`` waits for the replies. By the shards'
        channels every request is sent now, from the calling thread (no thread handed a call per
        shard; one call in flight on each: wait for these before the next); else each call runs in
        the pool (one shard without a channel: here, now). Meanwhile the caller may work on
        anything but these links (a merge round takes its next part's rows).

        Raises
        ------
        gensim_distw2v.protocol.errors.ShardLost
            A shard does not answer (:meth:`call`'s), here or at ``result()``.
        """
        if op in self.bulk and all(self._checked_channel(s) for s in range(len(self.shards))):
            shard = 0
            try:
                for shard, request in enumerate(requests):
                    self.channels[shard].start(op, request)
            except BaseException as err:
                self._release_channels()  # (the others' calls are in flight: their links are out of step)
                if isinstance(err, channel.LinkBroken):
                    raise self._lost(shard, err) from None
                raise
            return InFlight(self, op, channels=True)

        def one(shard):
            began = time.thread_time()
            return self.call(shard, op, requests[shard]), time.thread_time() - began
        if self.pool is None:
            return InFlight(self, op, done=[one(0)])
        return InFlight(self, op, futures=[self.pool.submit(one, shard) for shard in range(len(self.shards))])

    def _release_channels(self):
        for bulk in self.channels:
            if bulk:
                bulk.release()

    def _lost(self, shard, err):
        name, uri = self.shards[shard]
        host, port, _broadcast, _key = keys.ns_settings(self.ns_conf)
        return self.LOST(f"lost parameter shard {name} at {uri} ({type(err).__name__}: {err}); "
                         + self.ADVICE.format(host=host, port=port))

    def _checked_channel(self, shard):
        """:meth:`_channel`, a shard that does not answer raising :attr:`LOST`."""
        try:
            return self._channel(shard)
        except transport.PyroError as err:
            raise self._lost(shard, err) from None

    def _channel(self, shard):
        """Shard ``shard``'s channel link (connected at its first call), or False: it has none."""
        bulk = self.channels[shard]
        if bulk is None:
            try:
                port = self.links[shard].call("channel") if channel.available() else 0
            except ValueError as err:  # a shard of a release without the call: Pyro4 carries its merges
                logger.info("shard %s has no bulk channel (%s): merges go by Pyro4", self.shards[shard][0], err)
                port = 0
            host = transport.uri_host(self.shards[shard][1])
            bulk = channel.ChannelLink((host, port), tables.SHARD, self.hmac_key, self.timeout) if port else False
            if bulk:
                try:
                    bulk.connect()
                    logger.info("merges with shard %s by its channel at %s:%i", self.shards[shard][0], host, port)
                except channel.LinkBroken as err:  # a firewall that lets Pyro4's port through only, say
                    logger.warning("cannot reach shard %s's channel (%s): merges with it go by Pyro4; let its "
                                   "--channel-port through", self.shards[shard][0], err)
                    bulk = False
            self.channels[shard] = bulk
        return bulk

    def each(self, fn):
        """``[fn(0), fn(1), ...]``, one per shard, in parallel when there are several."""
        if self.pool is None:
            return [fn(0)]
        return list(self.pool.map(fn, range(len(self.shards))))

    def close(self, sid=None):
        """Release the connections; with ``sid``, close that session on every shard first (best effort)."""
        for shard, link in enumerate(self.links):
            if sid is not None:
                try:
                    link.timeout = CLOSE_TIMEOUT
                    token = self.close_tokens[shard] if self.close_tokens else self.token
                    link.call("close", session=sid, token=token)
                except (transport.PyroError, ValueError) as err:
                    logger.warning("could not close session %s on shard %s: %s", sid, self.shards[shard][0], err)
            link.release()
        self._release_channels()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


class InFlight:
    """Calls to every shard of :meth:`ShardLinks.start_all`, under way: :meth:`result` waits for their
    replies; :meth:`abandon` gives them up (their channels are closed: the next call connects again)."""

    def __init__(self, links, op, channels=False, done=None, futures=None):
        self.links, self.op, self.channels, self.done, self.futures = links, op, channels, done, futures
        self.finished = False

    def result(self):
        """``(replies, CPU seconds of the pool's threads)``, per shard in order.

        Raises
        ------
        gensim_distw2v.protocol.errors.ShardLost
            A shard does not answer.
        """
        if self.finished:
            raise RuntimeError(f"the replies to {self.op} were taken already")
        self.finished = True
        if self.channels:
            links, replies, shard = self.links, [], 0
            try:
                for shard in range(len(links.shards)):
                    replies.append(links.channels[shard].result())
            except BaseException as err:
                links._release_channels()
                if isinstance(err, channel.LinkBroken):
                    raise links._lost(shard, err) from None
                raise
            return replies, 0.0
        done = self.done if self.futures is None else [future.result() for future in self.futures]
        return [reply for reply, _cpu in done], sum(cpu for _reply, cpu in done) if self.futures is not None else 0.0

    def ready(self, timeout=0.0):
        """Whether every reply has begun to arrive (:meth:`result` will not wait for a shard's work or the
        wire, only for the rest of a message under way), waiting at most ``timeout`` seconds in all."""
        if self.finished:
            return True
        if self.channels:
            deadline = time.monotonic() + timeout
            for link in self.links.channels:
                if not link.ready(max(0.0, deadline - time.monotonic())):
                    return False
            return True
        if self.futures is None:
            return True
        _done, waiting = concurrent.futures.wait(self.futures, timeout=timeout)
        return not waiting

    def abandon(self):
        """Give the calls up (an error on the caller's side while they were under way): channels are
        closed, pool calls finish on their own and are dropped."""
        if not self.finished:
            self.finished = True
            if self.channels:
                self.links._release_channels()
