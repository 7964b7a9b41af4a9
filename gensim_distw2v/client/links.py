"""The client's links to the cluster: finding the dispatcher, waiting for members, the session's shards."""
import logging
import time

from gensim_distw2v.io import endpoints, keys, links, transport
from gensim_distw2v.protocol.constants import DISPATCHER_NAME
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.protocol import tables
from gensim_distw2v.protocol.errors import ShardLostError  # (re-exported: what train() raises for a lost shard)
from gensim_distw2v.core.layout import ShardLayout

logger = logging.getLogger(__name__)

__all__ = ["find_dispatcher", "wait_for_workers", "ShardLinks", "ShardLostError"]


def find_dispatcher(ns_conf, hmac_key=None, timeout=60.0):
    """A link (:class:`gensim_distw2v.io.endpoints.Link`) to the dispatcher registered in the name
    server of ``ns_conf``: ``link.call(op, request)`` with :data:`gensim_distw2v.protocol.tables.DISPATCHER`'s calls.

    Raises
    ------
    ClusterError
        No name server, or no dispatcher registered in it; the message says how to start it.
    """
    host, port, _broadcast, key = keys.ns_settings(ns_conf)
    hmac_key = hmac_key or key  # the cluster's key, given in ns_conf
    uri = transport.lookup(ns_conf, DISPATCHER_NAME)
    if uri is None:
        raise ClusterError(
            f"no dispatcher is registered as {DISPATCHER_NAME} in the name server at {host}:{port}. "
            f"Start one with: python -m gensim_distw2v.dispatcher --ns-host {host} --ns-port {port}")
    link = endpoints.link(uri, tables.DISPATCHER, hmac_key, timeout=timeout)
    try:
        link.bind()
    except transport.PyroError as err:
        link.release()
        raise ClusterError(
            f"the dispatcher registered at {uri} does not answer ({err}); it may have died: start it again "
            f"with: python -m gensim_distw2v.dispatcher --ns-host {host} --ns-port {port}") from None
    return link


def wait_for_workers(dispatcher, ns_conf, timeout):
    """Wait until at least one worker and one shard are registered; return the number of workers."""
    host, port, _broadcast, _key = keys.ns_settings(ns_conf)
    deadline = time.monotonic() + timeout
    while True:
        status = dispatcher.call("status")
        if status.workers and status.shards:
            return len(status.workers)
        if time.monotonic() >= deadline:
            role = "workers" if not status.workers else "parameter shards"
            module = "worker" if not status.workers else "shard"
            raise ClusterError(
                f"no {role} registered with the dispatcher within {timeout:.0f} s. Start one on each node with: "
                f"python -m gensim_distw2v.{module} --ns-host {host} --ns-port {port}")
        time.sleep(0.2)


class ShardLinks(links.ShardLinks):
    """The client's links to a session's shards (:class:`gensim_distw2v.io.links.ShardLinks`): a
    shard that does not answer raises :class:`ShardLostError`, saying what it means for the model.

    Parameters
    ----------
    shards : list of (str, str)
        ``[name, uri]`` of each shard, in the session's order.
    hmac_key : bytes, optional
        The cluster's key.
    ns_conf : dict
        Where the name server is (for the restart command in errors).
    capabilities : list of str
        Per shard, the capability the owner's secret gives for it (:func:`gensim_distw2v.protocol.shard_capability`):
        what each is shown to open, start and close the session. The owner's secret itself is never sent to a shard.
    token : str, optional
        The session's token (``Opened.token``, its workers' too): what the trained weights' download shows.
    """

    ADVICE = ("this train() call did not finish and the model keeps the weights it had before it (or at the last "
              "epoch end, with callbacks). Restart the shard with: python -m gensim_distw2v.shard --ns-host {host} "
              "--ns-port {port}, then call train() again")
    LOST = ShardLostError

    def __init__(self, shards, hmac_key, ns_conf, capabilities, token=None):
        if len(capabilities) != len(shards):
            raise ValueError(f"{len(capabilities)} capabilities for {len(shards)} shards")
        super().__init__(shards, hmac_key, ns_conf, token, close_tokens=list(capabilities))
        self.layout = ShardLayout(len(self.shards))
