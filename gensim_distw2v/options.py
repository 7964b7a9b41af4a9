"""The daemons' options, each declared once: a frozen, checked dataclass per role.

Every option is a field (:func:`gensim_distw2v.config.fields.option`): its default, a one-line help and
its check. Each daemon builds its command line from its class (:func:`parser`), parses it into an
object (a bad value exits with an error naming the option and what it allows), and constructs its
role from it (:meth:`~gensim_distw2v.config.fields.Declared.role_kwargs`: the fields declared
``role=True`` are the role's constructor's keywords, whose defaults are these fields' too).

The options every server shares (:class:`ServerOptions`: where the name server is, what to bind,
the key, the log level and the limits of a connection before its handshake) are declared once;
:class:`NameServerOptions`, :class:`DispatcherOptions`, :class:`ShardOptions` and
:class:`WorkerOptions` add their own.
"""
import argparse
import dataclasses
import typing

from gensim_distw2v.config import fields
from gensim_distw2v.config.fields import Choice, Count, Flag, Real, Text, option
from gensim_distw2v.io import keys, transport
from gensim_distw2v.io.keys import HMAC_ENV
from gensim_distw2v.protocol.constants import LONG_POLL

__all__ = ["DispatcherOptions", "NameServerOptions", "ServerOptions", "ShardOptions", "WorkerOptions", "parse",
           "parser"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LIMITS = transport.Limits()  # the pre-authentication limits' defaults are Limits' own
PORT = Count(0, 65535)
LOCAL = "127.0.0.1"  # what the servers bind, and look for, by default


def _host(flags=()):
    return option(LOCAL, "address to bind (others than loopback need the cluster's HMAC key)", Text("HOST"),
                  flags=flags)


def _max_model_bytes(what):
    return option(None, f"{what}, in bytes (None: half this machine's memory)", Count(1, optional=True), role=True)


def _sign_checkpoints():
    return option(True, "sign checkpoints' manifests with the cluster's HMAC key, and read back only those it "
                        "signed (a resume needs the same key); off for a key made afresh for each cluster, as "
                        "LocalCluster's own", Flag(), role=True)


@dataclasses.dataclass(frozen=True)
class _Common(fields.Declared):
    """What every server process of the cluster takes, the name server included."""

    FLAGS = True

    host: str = _host()
    port: int = option(0, "port to bind (0: any free port)", PORT)
    hmac_key_file: typing.Optional[str] = option(
        None, f"file holding the cluster's HMAC key (None: the environment's {HMAC_ENV}, or no key)",
        Text("FILE", optional=True))
    log_level: str = option("INFO", "logging level", Choice(LOG_LEVELS, normalise=str.upper, cli_type=str.upper))
    handshake_timeout: float = option(
        _LIMITS.handshake_timeout, "seconds a new connection has, in all, to complete its handshake",
        Real(0.0, 600.0, low_open=True, unit="seconds"))
    max_connections_per_peer: int = option(_LIMITS.max_per_peer, "open connections allowed from one address",
                                           Count(1))

    def limits(self):
        """The :class:`gensim_distw2v.io.transport.Limits` of these options."""
        return transport.Limits(handshake_timeout=self.handshake_timeout, max_per_peer=self.max_connections_per_peer)


@dataclasses.dataclass(frozen=True)
class NameServerOptions(_Common):
    """``python -m gensim_distw2v.nameserver``'s options (Pyro4's ``-n`` and ``-p`` too)."""

    host: str = _host(flags=("-n",))
    port: int = option(keys.DEFAULT_NS_PORT, "port to bind", PORT, flags=("-p",))


@dataclasses.dataclass(frozen=True)
class ServerOptions(_Common):
    """What the dispatcher, the shards and the workers take: :class:`NameServerOptions`' own, and
    where the name server is."""

    ns_host: str = option(LOCAL, "name server host", Text("HOST"))
    ns_port: int = option(keys.DEFAULT_NS_PORT, "name server port", Count(1, 65535))

    def ns_conf(self):
        """Where the name server is, as ``ns_conf``."""
        return {"host": self.ns_host, "port": self.ns_port}


@dataclasses.dataclass(frozen=True)
class DispatcherOptions(ServerOptions):
    """``python -m gensim_distw2v.dispatcher``'s options."""

    worker_timeout: float = option(30.0, "seconds without a heartbeat before a worker or shard is dropped",
                                   Real(0.0, low_open=True, unit="seconds"), role=True)
    client_timeout: float = option(120.0, "seconds without a call before a client's session is aborted",
                                   Real(0.0, low_open=True, unit="seconds"), role=True)
    job_deadline: float = option(
        120.0, "seconds a worker may hold jobs without merging them (and at least ten typical rounds) before it is "
               "dropped and its jobs re-queued", Real(0.0, low_open=True, unit="seconds"), role=True)
    max_model_bytes: typing.Optional[int] = _max_model_bytes("the largest session's arrays this dispatcher holds")
    sign_checkpoints: bool = _sign_checkpoints()
    allow_takeover: bool = option(
        False, "let a client that resumes a run replace the run's running session at once (its client died, say); "
               "without it, the resume waits for that session to end (client_timeout after its client's last call): "
               "a member holding the key cannot take over a live client's session", Flag(), role=True)
    status_port: typing.Optional[int] = option(
        None, "serve a read-only HTTP status page (and /status.json) on this port (0: any free port; None: none)",
        Count(0, 65535, optional=True))
    status_host: str = option(LOCAL, "address of the status page (it has no authentication)", Text("HOST"))
    status_name: typing.Optional[str] = option(
        None, "host names (comma-separated) a browser may reach the status page by, besides its addresses and "
              "localhost: a request naming another host is refused (DNS rebinding)", Text("NAMES", optional=True))


@dataclasses.dataclass(frozen=True)
class _MemberOptions(ServerOptions):
    """What the shards and the workers take besides :class:`ServerOptions`."""

    heartbeat: float = option(1.0, f"seconds between heartbeats (the dispatcher waits at most {LONG_POLL:g} s)",
                              Real(0.0, LONG_POLL, low_open=True, unit="seconds"), role=True)


@dataclasses.dataclass(frozen=True)
class ShardOptions(_MemberOptions):
    """``python -m gensim_distw2v.shard``'s options."""

    max_model_bytes: typing.Optional[int] = _max_model_bytes("the most a session's rows may take on this shard")
    sign_checkpoints: bool = _sign_checkpoints()
    channel_port: int = option(0, "port of the bulk channel that carries merge rounds, beside Pyro4's (0: any free "
                                  "port; -1: none, merges go by Pyro4)", Count(-1, 65535))


@dataclasses.dataclass(frozen=True)
class WorkerOptions(_MemberOptions):
    """``python -m gensim_distw2v.worker``'s options."""

    threads: typing.Optional[int] = option(None, "trainer threads (None: this node's cores)", Count(1, optional=True),
                                           role=True)
    merge_threads: typing.Optional[int] = option(
        None, "threads that take and apply a merge round's rows, each on rows of its own (None: one per four "
              "trainer threads, one to four)", Count(1, 64, optional=True), role=True)
    corpus_dir: typing.Optional[str] = option(
        None, "the only folders (separated by ':') whose files this worker reads as corpora, to train or count "
              "them, symlinks resolved; a file elsewhere is refused without a look at it (None: any file this "
              "user can read)", Text("DIRS", optional=True), role=True)


def parser(cls, prog, description):
    """An ``argparse`` parser of ``cls``'s options, with their defaults in the help."""
    made = argparse.ArgumentParser(prog=prog, description=description,
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    fields.add_arguments(made, cls)
    return made


def parse(made, cls, argv=None):
    """``argv`` parsed by ``made`` (a :func:`parser` of ``cls``) into a ``cls``; a bad value exits
    (status 2) with an error naming the option and what it allows."""
    args = made.parse_args(argv)
    try:
        return cls.from_args(args)
    except ValueError as err:
        made.error(str(err))
