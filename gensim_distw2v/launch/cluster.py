"""A cluster started on hosts by their agents (:mod:`gensim_distw2v.launch.agent`): the name
server and the dispatcher on the scheduler's host, a parameter shard and a worker on every host,
one fresh HMAC key given to each agent on its standard input; ready once every member has joined
the dispatcher; stopped, on every host, when closed (and a host's rest when one of its processes
is lost). How an agent is started is the runner's business (:class:`gensim_distw2v.launch.ssh.SshRunner`).
"""
import logging
import queue
import secrets
import time

from gensim_distw2v.client.links import find_dispatcher
from gensim_distw2v.io import keys, transport
from gensim_distw2v.launch.agent import MAX_SHARDS_PER_HOST
from gensim_distw2v.launch.events import LaunchError
from gensim_distw2v.launch.ssh import AGENT_STOP_SECONDS
from gensim_distw2v.versions import versions

logger = logging.getLogger(__name__)

__all__ = ["RemoteCluster", "JOIN_SECONDS", "SCHEDULER", "dispatcher_status", "wait_for_members"]

SCHEDULER = "(scheduler)"  # the scheduler's agent among the links (no host's label has parentheses)
HOST_UP_SECONDS = 90.0  # the most an agent may take to start its host's servers
JOIN_SECONDS = 120.0  # the most every member may take to join the dispatcher once started


def dispatcher_status(ns_conf):
    """The :class:`gensim_distw2v.protocol.Status` of the dispatcher of ``ns_conf`` (one call)."""
    link = find_dispatcher(ns_conf)
    try:
        return link.call("status")
    finally:
        transport.release(link)


def wait_for_members(ns_conf, count, check, shards=None):
    """Wait until ``count`` workers and ``shards`` shards (default ``count``) have joined the dispatcher of
    ``ns_conf``; ``check()`` says which hosts were lost meanwhile (``{label: why}``: a LaunchError)."""
    shards = count if shards is None else shards
    deadline = time.monotonic() + JOIN_SECONDS
    link = find_dispatcher(ns_conf)
    try:
        while True:
            status = link.call("status")
            if len(status.workers) >= count and len(status.shards) >= shards:
                return status
            gone = check()
            if gone:
                raise LaunchError("; ".join(gone.values()))
            if time.monotonic() > deadline:
                raise LaunchError(f"{len(status.workers)} workers of {count} and {len(status.shards)} shards of {shards} "
                                  f"joined the dispatcher within {JOIN_SECONDS:.0f} s: can the hosts reach "
                                  f"{ns_conf['host']}:{ns_conf['port']} and each other? (docs/cluster.rst: ports "
                                  f"to open)")
            time.sleep(0.2)
    finally:
        transport.release(link)


class RemoteCluster:
    """A cluster on ``hosts`` (see the module's docstring), as a context manager.

    Parameters
    ----------
    hosts : list of gensim_distw2v.launch.hosts.Host
        ``shards_per_host`` shards and a worker on each.
    runner : gensim_distw2v.launch.ssh.SshRunner
        How an agent is started on a host.
    scheduler : gensim_distw2v.launch.hosts.Host, optional
        Where the name server and the dispatcher run (default: the first host).
    ns_port : int
        The name server's port on it.
    log_level : str
        The servers' ``--log-level``.
    corpus_dir : str, optional
        The workers' ``--corpus-dir`` (the only folders whose files they read as corpora).
    shards_per_host : int
        Shard processes on each host (default 1).

    Attributes
    ----------
    ns_conf : dict
        Pass it to ``Word2Vec(distributed=True, ns_conf=...)`` (it carries the key).
    """

    def __init__(self, hosts, runner, scheduler=None, ns_port=keys.DEFAULT_NS_PORT, log_level="WARNING",
                 corpus_dir=None, shards_per_host=1):
        if not hosts:
            raise ValueError("a cluster needs at least one host")
        self.hosts, self.runner = list(hosts), runner
        self.scheduler = scheduler or self.hosts[0]
        self.ns_port, self.log_level, self.corpus_dir = int(ns_port), log_level, corpus_dir
        if not 1 <= int(shards_per_host) <= MAX_SHARDS_PER_HOST:
            raise ValueError(f"shards_per_host must be 1 to {MAX_SHARDS_PER_HOST}, got {shards_per_host!r}")
        self.shards_per_host = int(shards_per_host)
        self.links = {}  # label -> AgentLink; the scheduler's under SCHEDULER
        self.ns_conf = None
        self.lost = {}  # label -> why

    def _agent_args(self, host, roles):
        return ["--roles", ",".join(roles), "--host", host.address, "--ns-host", self.scheduler.address,
                "--ns-port", str(self.ns_port), "--threads", str(host.threads), "--log-level", self.log_level,
                "--label", host.label, "--shards", str(self.shards_per_host)] \
            + (["--corpus-dir", self.corpus_dir] if self.corpus_dir else [])

    def start(self):
        """Start every host's agent and wait until every worker and shard has joined; returns self.

        Raises
        ------
        LaunchError
            A host could not start its part (unreachable, another version, a port in use...) or a
            member did not join in time: the message names it; everything started is stopped.
        """
        key = secrets.token_urlsafe(32)
        hello = {"key": key, "versions": versions()}
        try:
            self.links[SCHEDULER] = self.runner.start(self.scheduler, self._agent_args(
                self.scheduler, ["nameserver", "dispatcher"]), hello)
            self.links[SCHEDULER].wait_event(HOST_UP_SECONDS)
            self.ns_conf = {"host": self.scheduler.address, "port": self.ns_port, "hmac_key": key}
            for host in self.hosts:
                self.links[host.label] = self.runner.start(host, self._agent_args(host, ["shard", "worker"]), hello)
            for host in self.hosts:
                self.links[host.label].wait_event(HOST_UP_SECONDS)
            self._wait_for_members()
        except BaseException:
            self.close()
            raise
        logger.info("cluster up: %i hosts, name server at %s:%i", len(self.hosts), self.scheduler.address,
                    self.ns_port)
        return self

    def _wait_for_members(self):
        return wait_for_members(self.ns_conf, len(self.hosts), self.check, len(self.hosts) * self.shards_per_host)

    def status(self):
        """The dispatcher's :class:`gensim_distw2v.protocol.Status` of the cluster."""
        return dispatcher_status(self.ns_conf)

    def check(self):
        """The hosts lost since the last look, ``{label: why}``: an agent whose connection ended, or
        that said one of its processes exited (it stops the host's others itself)."""
        found = {}
        for label, link in list(self.links.items()):
            if label in self.lost:
                continue
            news = []
            while True:
                try:
                    news.append(link.events.get_nowait())
                except queue.Empty:
                    break
            ended = [event for event in news if event is None or event.kind in ("exited", "error")]
            if not ended and link.alive():
                continue
            first = ended[0] if ended else None
            if first is not None and first.kind == "exited":
                why = f"host {first.host}: its {first.role} exited with code {first.code}"
            elif first is not None:
                why = first.message
            else:
                why = link.why_gone()
            self.lost[label] = found[label] = why
        return found

    def close(self):
        """Stop every host's part: every host's agent told at once, then the scheduler's; one deadline
        for all (dozens of hosts stop in the time of one)."""
        hosts = [link for label, link in self.links.items() if label != SCHEDULER]
        for link in hosts:
            link.close_input()
        deadline = time.monotonic() + AGENT_STOP_SECONDS
        for link in hosts:
            link.stop(deadline - time.monotonic())
        if SCHEDULER in self.links:
            self.links[SCHEDULER].stop()
        self.links.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False
