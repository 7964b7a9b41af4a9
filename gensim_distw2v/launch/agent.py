"""``python -m gensim_distw2v.launch.agent``: what a launcher runs on each host (over SSH, or as a
SLURM task) to start this host's part of a cluster, and to stop it.

It reads one line of JSON on its standard input: the cluster's HMAC key and the versions the
launcher runs (the key so never shows on a command line nor in a file); it checks this host runs
the same versions and that the name server's port is free, then starts its roles as child
processes (the name server and the dispatcher on the scheduler's host, a parameter shard and a
worker on every host), each with the key in its environment only, and says so on its standard
output, one JSON object a line (:class:`Event`). It stops every child, and exits, when its standard
input closes (the launcher stopped, died, or lost the connection: ``ssh`` passes the end on), when
that input is silent for :data:`~gensim_distw2v.launch.events.SILENT_SECONDS` (the launcher writes a
line every few seconds; a cut network closes nothing for hours), on SIGTERM or SIGINT, or when one
of its children exits (saying which, with its last lines): nothing of the cluster outlives the
launcher on any host. ``--shards N`` starts N shard processes on the host (more fold threads and GILs
on its cores: docs/scaling.rst, "Each K at its own interval, and two shards a node").
"""
import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time

from gensim_distw2v.client.cluster import ManagedProcess
from gensim_distw2v.io import transport
from gensim_distw2v.io.keys import HMAC_ENV
from gensim_distw2v.protocol.constants import DISPATCHER_NAME
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.launch.events import SILENT_SECONDS, Event
from gensim_distw2v.versions import versions

logger = logging.getLogger(__name__)

ROLES = ("nameserver", "dispatcher", "shard", "worker")
SHARED_VERSIONS = ("gensim_distw2v", "gensim")  # the versions a host must share with the launcher
SERVER_UP_SECONDS = 60.0  # the most the name server and the dispatcher may take to come up
SERVER_STOP_SECONDS = 5.0  # SIGTERM, then SIGKILL after this
MAX_SHARDS_PER_HOST = 16  # a shard is a process with a fold thread: more shards a host, more of its cores fold


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v.launch.agent",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--roles", required=True, help="comma-separated: nameserver, dispatcher, shard, worker")
    parser.add_argument("--host", required=True, help="the address this host's servers bind and are reached at")
    parser.add_argument("--ns-host", required=True)
    parser.add_argument("--ns-port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0, help="the worker's threads (0: this host's cores less one)")
    parser.add_argument("--shards", type=int, default=1, choices=range(1, MAX_SHARDS_PER_HOST + 1), metavar="N",
                        help=f"parameter shards on this host (1 to {MAX_SHARDS_PER_HOST}; default 1)")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--corpus-dir", default=None, help="the worker's --corpus-dir (default: none given)")
    parser.add_argument("--label", default=None, help="how the launcher names this host (for messages)")
    return parser


def say(event):
    """One event to the launcher (standard output, a line)."""
    sys.stdout.write(event.to_line())
    sys.stdout.flush()


def version_problem(expected, label):
    """What differs between this host's versions and the launcher's (None: nothing)."""
    here = versions()
    differ = [f"{name} {here.get(name)} here, {expected.get(name)} on the launcher's machine" for name in SHARED_VERSIONS
              if here.get(name) != expected.get(name)]
    if not differ:
        return None
    return (f"host {label} runs other versions: {'; '.join(differ)}; install the launcher's versions there "
            f"(pip install gensim_distw2v=={expected.get('gensim_distw2v')} gensim=={expected.get('gensim')}), "
            f"or give --python the interpreter of a virtualenv that has them")


def port_problem(host, port, label):
    """Whether the name server's port is free on ``host`` (None) or why not."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the name server binds (TIME_WAIT is free)
        try:
            sock.bind((host, port))
        except OSError as err:
            return (f"host {label}: cannot bind the name server's port {host}:{port} ({err.strerror}): another "
                    f"process uses it (a cluster still running?); stop it, or pick another port with --ns-port")
    return None


class Agent:
    """This host's servers (see the module's docstring).

    Parameters
    ----------
    args : argparse.Namespace
        The command line's options.
    key : str
        The cluster's HMAC key.
    """

    def __init__(self, args, key):
        self.args, self.key = args, key
        self.label = args.label or args.host
        self.children = []
        self.stopped = threading.Event()

    def _env(self):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env[HMAC_ENV] = env["PYRO_HMAC_KEY"] = self.key
        return env

    def _start(self, role, extra):
        args = self.args
        proc = ManagedProcess(role, [sys.executable, "-P", "-m", f"gensim_distw2v.{role}", "--log-level",
                                     args.log_level] + extra, env=self._env())
        self.children.append(proc)
        return proc

    def start(self, roles):
        """Start ``roles`` (in :data:`ROLES`' order); the name server and the dispatcher are waited for."""
        args = self.args
        where = ["--ns-host", args.ns_host, "--ns-port", str(args.ns_port)]
        for role in ROLES:
            if role not in roles:
                continue
            if role == "nameserver":
                proc = self._start(role, ["-n", args.host, "-p", str(args.ns_port)])
                self._wait(proc, lambda: transport.release(transport.locate_ns(
                    {"host": args.ns_host, "port": args.ns_port, "hmac_key": self.key.encode("utf8")}, timeout=2.0)))
            elif role == "dispatcher":  # (its key is made for this launch: checkpoints signed with it could not be resumed)
                proc = self._start(role, ["--host", args.host, "--no-sign-checkpoints"] + where)
                self._wait(proc, lambda: transport.lookup({"host": args.ns_host, "port": args.ns_port,
                                                           "hmac_key": self.key.encode("utf8")},
                                                          DISPATCHER_NAME) or _not_yet())
            elif role == "shard":  # (each its own process: its own fold thread and GIL)
                for _ in range(args.shards):
                    self._start(role, ["--host", args.host, "--no-sign-checkpoints"] + where)
            else:
                threads = args.threads or max(1, (os.cpu_count() or 2) - 1)
                folders = ["--corpus-dir", args.corpus_dir] if args.corpus_dir else []
                self._start(role, ["--host", args.host, "--threads", str(threads)] + folders + where)

    def _wait(self, proc, check):
        deadline = time.monotonic() + SERVER_UP_SECONDS
        while True:
            try:
                return check()
            except (LookupError, ClusterError, transport.PyroError, OSError, ValueError) as err:
                missing = err
            if not proc.alive():
                raise RuntimeError(f"host {self.label}: the {proc.name} exited with code {proc.proc.returncode} "
                                   f"before it was up ({missing}); its last lines:\n{proc.tail()}")
            if self.stopped.is_set():
                raise RuntimeError(f"host {self.label}: stopped while its {proc.name} was starting")
            if time.monotonic() > deadline:
                raise RuntimeError(f"host {self.label}: the {proc.name} did not come up within {SERVER_UP_SECONDS:.0f} s "
                                   f"({missing}); its last lines:\n{proc.tail()}")
            time.sleep(0.1)

    def watch(self, once=False):
        """Until stopped (``once``: now): a child that exited ends this host's part (its event)."""
        while True:
            for proc in self.children:
                if not proc.alive():
                    return Event("exited", host=self.label, role=proc.name, code=proc.proc.returncode,
                                 message=proc.tail(20))
            if once or self.stopped.wait(0.25):
                return None

    def stop(self):
        """Stop every child: workers first, the name server last; SIGKILL past :data:`SERVER_STOP_SECONDS`."""
        self.stopped.set()
        for proc in reversed(self.children):
            proc.terminate()
        deadline = time.monotonic() + SERVER_STOP_SECONDS
        for proc in reversed(self.children):
            try:
                proc.proc.wait(max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - TimeoutExpired: killed below
                pass
            proc.kill()


def _not_yet():
    raise LookupError("not registered in the name server yet")


def _read_hello():
    """The launcher's first line: ``{"key": str, "versions": dict}``."""
    line = sys.stdin.readline()
    try:
        hello = json.loads(line)
        if not isinstance(hello.get("key"), str) or not hello["key"] or not isinstance(hello.get("versions"), dict):
            raise ValueError("no key or versions")
        return hello
    except (ValueError, AttributeError) as err:
        raise SystemExit(f"the first line on standard input must be the launcher's JSON hello ({err})") from None


def main(argv=None):
    args = build_parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=args.log_level)
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    label = args.label or args.host
    if not roles or set(roles) - set(ROLES):
        say(Event("error", host=label, message=f"--roles must be among {', '.join(ROLES)}, got {args.roles!r}"))
        return 2
    hello = _read_hello()
    problem = version_problem(hello["versions"], label) or (
        port_problem(args.host, args.ns_port, label) if "nameserver" in roles else None)
    if problem:
        say(Event("error", host=label, message=problem))
        return 2
    agent = Agent(args, hello["key"])

    def end(*_ignored):
        agent.stopped.set()
    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)
    heard = [time.monotonic()]

    def listen():  # the launcher's beats, until its input closes (the launcher's end)
        for _line in sys.stdin:
            heard[0] = time.monotonic()
        end()

    def watchdog():  # ... or they stop coming (the network to the launcher cut)
        while not agent.stopped.wait(1.0):
            if time.monotonic() - heard[0] > SILENT_SECONDS:
                logger.warning("host %s: nothing from the launcher for %.0f s; stopping this host's part", label,
                               SILENT_SECONDS)
                end()
    threading.Thread(target=listen, name="stdin", daemon=True).start()
    threading.Thread(target=watchdog, name="watchdog", daemon=True).start()
    try:
        agent.start(roles)
        say(Event("ready", host=label, roles=roles, pids={p.name: p.pid for p in agent.children}))
        gone = agent.watch()
        if gone is not None:
            say(gone)
            return 1
        return 0
    except RuntimeError as err:
        say(Event("error", host=label, message=str(err)))
        return 1
    finally:
        agent.stop()


if __name__ == "__main__":
    sys.exit(main())
