"""``LocalCluster``: a name server, a dispatcher, P parameter shards and N workers as subprocesses on loopback.

    >>> from gensim_distw2v import LocalCluster, Word2Vec
    >>> with LocalCluster(n_workers=2, threads_per_worker=1) as cluster:   # doctest: +SKIP
    ...     model = Word2Vec(sentences, distributed=True, ns_conf=cluster.ns_conf)

Every process logs (at INFO by default) into a pipe that is read line by line (see
``cluster.processes[name].output()``). Start-up is judged by asking, never by sleeping nor by
what the logs say: the name server answers; the dispatcher is registered in it and answers a
status call; each shard and worker is registered in it under a name of its own, answers, and the
dispatcher lists it (a new output line only makes LocalCluster ask again sooner). The shards and
workers start at once (Linux; elsewhere one at a time). On exit (also on an error or Ctrl-C)
every process is stopped; the children also die with their parent (Linux).
"""
import contextlib
import ctypes
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time

import gensim_distw2v
from gensim_distw2v.io import serving, transport
from gensim_distw2v.io.keys import as_key, HMAC_ENV
from gensim_distw2v.protocol.constants import DISPATCHER_NAME, SHARD_PREFIX, WORKER_PREFIX
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.options import DispatcherOptions

logger = logging.getLogger(__name__)

__all__ = ["LocalCluster", "ManagedProcess"]

_PREFIX = {"worker": WORKER_PREFIX, "shard": SHARD_PREFIX}
POLL = 0.25  # seconds between two questions to a process that is coming up and prints nothing


def _ask_status(uri, hmac_key):
    """The ``status()`` reply (plain data) of the dispatcher, shard or worker at ``uri``: the one
    remote call LocalCluster makes to its processes."""
    proxy = transport.connect(uri, hmac_key, timeout=10.0)
    try:
        return proxy.call("status", {})  # every server's table has it (gensim_distw2v.protocol.tables)
    finally:
        transport.release(proxy)


class _NotYet(Exception):
    """A process is not up yet; the message says what is missing."""


def _listening_ports(pid):
    """The TCP ports process ``pid`` listens on, from Linux's /proc; None where /proc cannot say.

    How LocalCluster tells which of the shards and workers it started at once registered which
    name: its address (the port in its URI) is one its process listens on."""
    try:
        sockets = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # closed meanwhile
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    sockets.add(link[8:-1])
        ports = set()
        for table in ("tcp", "tcp6"):
            with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as rows:
                next(rows)
                for row in rows:
                    fields = row.split()  # sl, local address, remote address, state, ..., inode
                    if fields[3] == "0A" and fields[9] in sockets:  # 0A: LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        return ports
    except OSError:
        return None


def _die_with_parent():
    """preexec_fn: ask Linux to SIGKILL the child when its parent dies (no orphans after a kill -9).

    Linux ties this to the *thread* that started the child: a process started from a thread that
    ends is killed with it. Start cluster processes from a thread that outlives them (the main one)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ManagedProcess:
    """A child process whose output lines are collected and can be waited on.

    Parameters
    ----------
    name : str
        Short name for logs (``dispatcher``, ``worker-0``...).
    args : list of str
        Command line.
    env : dict, optional
        Environment.
    """

    def __init__(self, name, args, env=None):
        self.name, self.args = name, args
        self.lines = []
        self._terminated = False
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            text=True, bufsize=1, start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        self._reader = threading.Thread(target=self._read, name=f"{name}-output", daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def wait_for(self, pattern, timeout=60.0, start=0):
        """Wait until an output line (from line ``start`` on) matches ``pattern``; return the match.

        Raises
        ------
        RuntimeError
            The process exited first, or ``timeout`` passed; the message carries its last lines.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = start
        with self.cond:
            while True:
                for line in self.lines[seen:]:
                    match = regex.search(line)
                    if match:
                        return match
                seen = len(self.lines)
                remaining = deadline - time.monotonic()
                if not self.alive() and not self._reader.is_alive():
                    raise RuntimeError(f"{self.name} exited with code {self.proc.returncode} before logging "
                                       f"/{pattern}/; its last output:\n" + "\n".join(self.lines[-20:]))
                if remaining <= 0:
                    raise RuntimeError(f"{self.name} did not log /{pattern}/ within {timeout:.0f} s; its last "
                                       f"output:\n" + "\n".join(self.lines[-20:]))
                self.cond.wait(min(remaining, 0.5))

    def output(self):
        with self.cond:
            return "\n".join(self.lines)

    def wait_output(self, seen, timeout):
        """Wait until it has printed more than ``seen`` lines or ``timeout`` seconds have passed."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.lines) > seen, timeout)

    def tail(self, n=20):
        """Its last ``n`` output lines (all of them, once it has exited), as one string."""
        if not self.alive():
            self._reader.join(timeout=2.0)
        with self.cond:
            return "\n".join(self.lines[-n:])

    def terminate(self):
        """SIGTERM, once, without waiting (a second one could cut its clean stop short)."""
        if self.alive() and not self._terminated:
            self._terminated = True
            self.proc.terminate()

    def stop(self, timeout=5.0):
        """SIGTERM, then SIGKILL after ``timeout`` seconds."""
        if self.alive():
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5.0)

    def kill(self):
        """SIGKILL now (as a crash would)."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()


class LocalCluster:
    """A name server, a dispatcher, ``n_shards`` parameter shards and ``n_workers`` workers on
    loopback, as a context manager.

    Parameters
    ----------
    n_workers : int
        Worker processes.
    threads_per_worker : int
        Trainer threads in each worker.
    n_shards : int
        Parameter shard processes (the global weights' rows are spread over them; on a real
        cluster, one per worker node).
    worker_timeout : float
        The dispatcher drops a worker silent for this long.
    client_timeout : float
        The dispatcher aborts the session of a client silent for this long.
    job_deadline : float
        The dispatcher drops a worker that holds jobs without merging them for this long (and
        for ten typical rounds).
    hmac_key : str or bytes or False, optional
        Sign every message with this key (given to the processes through the environment). By default
        a random key, made for this cluster, which :attr:`ns_conf` carries to the client: other local
        users cannot talk to it or register fake servers in its name server (checkpoints are then
        not signed: the key is gone with the cluster, and a resume starts another). ``False``: no
        key (any local user can then drive the cluster; see the docs' Security page).
    status_port : int, optional
        The dispatcher serves its live status page on this port of 127.0.0.1 (0: a port free now);
        :attr:`status_url` says where. None (the default): no page.
    log_level : str
        Every process's ``--log-level`` (``DEBUG``, ``INFO``, ``WARNING``...); start-up never
        depends on what they log.
    shard_args : list of str
        More options of every shard's command line (``["--channel-port", "-1"]``: merges by Pyro4).
    worker_args : list of str
        More options of every worker's command line (``["--merge-threads", "2"]``).
    dispatcher_args : list of str
        More options of the dispatcher's command line (``["--allow-takeover"]``).

    Attributes
    ----------
    ns_conf : dict
        Pass it to ``Word2Vec(distributed=True, ns_conf=...)``.
    processes : dict of (str, ManagedProcess)
        ``nameserver``, ``dispatcher``, ``shard-0``..., ``worker-0``...
    names : dict of (str, str)
        The name each shard and worker process registered under, once it is up
        (``worker-0`` -> ``gensim_distw2v.worker.<id>``, the name the dispatcher's status gives).
    status_url : str or None
        The status page's address (``http://127.0.0.1:PORT/``; its JSON at ``status.json``), once started.
    """

    def __init__(self, n_workers=2, threads_per_worker=1, worker_timeout=DispatcherOptions.worker_timeout,
                 hmac_key=None, client_timeout=DispatcherOptions.client_timeout, n_shards=1,
                 job_deadline=DispatcherOptions.job_deadline, status_port=None, log_level="INFO", shard_args=(),
                 dispatcher_args=(), worker_args=()):
        if n_workers < 0 or threads_per_worker < 1 or n_shards < 0:
            raise ValueError("n_workers and n_shards must be >= 0 and threads_per_worker >= 1")
        self.n_workers, self.threads_per_worker, self.n_shards = n_workers, threads_per_worker, n_shards
        self.worker_timeout, self.client_timeout, self.job_deadline = worker_timeout, client_timeout, job_deadline
        self.hmac_key = None if hmac_key is False else as_key(hmac_key or secrets.token_urlsafe(32))
        self.log_level, self.shard_args, self.dispatcher_args = log_level, list(shard_args), list(dispatcher_args)
        self.worker_args = list(worker_args)
        if not hmac_key:  # a key of its own, gone with the cluster: checkpoints signed with it could not be resumed
            self.shard_args.append("--no-sign-checkpoints")
            self.dispatcher_args.append("--no-sign-checkpoints")
        self.processes, self.names = {}, {}
        self.ns_conf = None
        self.status_port, self.status_url = status_port, None
        self._next = {"shard": 0, "worker": 0}

    def _env(self):
        env = dict(os.environ)
        # the children import the very gensim_distw2v this process imported
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(gensim_distw2v.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONUNBUFFERED"] = "1"
        env.pop(HMAC_ENV, None)
        env.pop("PYRO_HMAC_KEY", None)
        if self.hmac_key:
            env[HMAC_ENV] = env["PYRO_HMAC_KEY"] = self.hmac_key.decode("utf8")
        return env

    def _spawn(self, name, module, args):
        """Start ``python -m <module> <args>`` as :attr:`processes`' ``name`` (not waiting for it)."""
        proc = ManagedProcess(name, [sys.executable, "-P", "-m", module, "--log-level", self.log_level] + args,
                              env=self._env())
        self.processes[name] = proc
        return proc

    @staticmethod
    def _wait_until(proc, check, timeout=60.0):
        """Ask ``check()`` until it returns (what it returns); it raises :class:`_NotYet` (or a
        transport error) while ``proc`` is not up. It asks again once ``proc`` prints a line (what
        it says does not matter), else every :data:`POLL` seconds.

        Raises
        ------
        RuntimeError
            ``proc`` exited first, or ``timeout`` passed: the message names it, says what was
            missing and carries its last output lines.
        """
        deadline = time.monotonic() + timeout
        while True:
            seen, alive = len(proc.lines), proc.alive()
            try:
                return check()
            except (_NotYet, ClusterError, transport.PyroError, OSError, ValueError) as err:
                missing = str(err)
            if not alive:
                raise RuntimeError(f"{proc.name} exited with code {proc.proc.returncode} before it was up "
                                   f"({missing}); its last output:\n{proc.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{proc.name} did not come up within {timeout:.0f} s ({missing}); its last "
                                   f"output:\n{proc.tail()}")
            proc.wait_output(seen, POLL)

    @contextlib.contextmanager
    def _name_server(self):
        """A proxy to the cluster's name server for the questions of one start-up (one connection)."""
        ns = transport.locate_ns(self.ns_conf)
        try:
            yield ns
        finally:
            transport.release(ns)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        """Start the name server, the dispatcher, the shards and the workers; return when all are up."""
        port = serving.free_port()
        self.ns_conf = {"host": "127.0.0.1", "port": port}
        if self.hmac_key:
            self.ns_conf["hmac_key"] = self.hmac_key
        proc = self._spawn("nameserver", "gensim_distw2v.nameserver", ["-n", "127.0.0.1", "-p", str(port)])
        self._wait_until(proc, lambda: transport.release(transport.locate_ns(self.ns_conf, timeout=5.0)))
        self.start_dispatcher()
        self._add(["shard"] * self.n_shards + ["worker"] * self.n_workers, wait=True)
        return self

    def start_dispatcher(self):
        """Start the dispatcher (again, after it stopped or was killed); return once it is registered
        in the name server and answers there."""
        old = self.processes.get("dispatcher")
        if old is not None and old.alive():
            raise RuntimeError("the dispatcher is still running: stop or kill it first")
        page = []
        if self.status_port is not None:
            page = ["--status-port", str(self.status_port or serving.free_port())]
        proc = self._spawn("dispatcher", "gensim_distw2v.dispatcher",
                           ["--ns-port", str(self.ns_conf["port"]), "--worker-timeout", str(self.worker_timeout),
                            "--client-timeout", str(self.client_timeout), "--job-deadline", str(self.job_deadline)]
                           + page + self.dispatcher_args)
        with self._name_server() as ns:
            self._wait_until(proc, lambda: self._dispatcher_status(ns))
        if page:  # it serves the page before it serves calls
            self.status_url = f"http://127.0.0.1:{page[1]}/"

    def _dispatcher_status(self, ns):
        """The status reply of the dispatcher registered in ``ns``; :class:`_NotYet` if none is."""
        try:
            uri = str(ns.lookup(DISPATCHER_NAME))
        except transport.NamingError:
            raise _NotYet(f"no dispatcher registered in the name server at 127.0.0.1:{self.ns_conf['port']}") from None
        return _ask_status(uri, self.hmac_key)

    def add_worker(self, wait=True):
        """Start one more worker; return once it is registered in the name server and answers, and,
        with ``wait``, once the dispatcher lists it.

        Returns
        -------
        str
            The worker's process name in :attr:`processes` (``worker-N``).
        """
        (name,) = self._add(["worker"], wait)
        return name

    def add_shard(self, wait=True, args=()):
        """Start one more parameter shard; return once it is registered in the name server and
        answers, and, with ``wait``, once the dispatcher lists it. ``args``: more of its command
        line's options (``["--channel-port", "-1"]``).

        Returns
        -------
        str
            The shard's process name in :attr:`processes` (``shard-N``).
        """
        (name,) = self._add(["shard"], wait, list(args))
        return name

    def _add(self, roles, wait, args=()):
        """Start a ``python -m gensim_distw2v.<role>`` for each of ``roles``, all at once where
        /proc tells their processes apart (else one at a time); return their process names once
        each is up (:attr:`names` holds the name it registered under), with ``wait`` once the
        dispatcher lists it too."""
        if len(roles) > 1 and _listening_ports(os.getpid()) is None:
            return [name for role in roles for name in self._add([role], wait, args)]
        with self._name_server() as ns:
            before = {role: set(ns.list(prefix=_PREFIX[role])) for role in set(roles)}
            started = []
            for role in roles:
                number = self._next[role]
                self._next[role] += 1
                extra = ["--threads", str(self.threads_per_worker)] + list(self.worker_args) if role == "worker" \
                    else list(self.shard_args)
                started.append((role, self._spawn(f"{role}-{number}", f"gensim_distw2v.{role}",
                                                  ["--ns-port", str(self.ns_conf["port"])] + extra + list(args))))
            for role, proc in started:
                self.names[proc.name] = self._wait_until(
                    proc, lambda proc=proc, role=role: self._registered(ns, proc, role, before[role]),
                    timeout=60.0 + 15.0 * len(roles))
            for role, proc in started:
                if wait:
                    self._wait_until(proc, lambda proc=proc, role=role: self._listed(ns, proc, role))
                logger.debug("%s up as %s (pid %i)", proc.name, self.names[proc.name], proc.pid)
        return [proc.name for _role, proc in started]

    def _registered(self, ns, proc, role, before):
        """The name ``proc`` registered under in ``ns``, once it answers there: a name new since
        ``before`` and not another process's, at a port ``proc`` listens on (where /proc says)."""
        taken = set(self.names.values())
        new = {member: str(uri) for member, uri in ns.list(prefix=_PREFIX[role]).items()
               if member not in before and member not in taken}
        if new and not proc.alive():
            raise _NotYet("it exited")
        ports = _listening_ports(proc.pid) if new else None
        if ports is not None:
            new = {member: uri for member, uri in new.items() if int(uri.rsplit(":", 1)[1]) in ports}
        if not new:
            raise _NotYet(f"not registered in the name server at 127.0.0.1:{self.ns_conf['port']}")
        if len(new) > 1:
            raise RuntimeError(f"{proc.name}: {len(new)} {role}s registered at once ({', '.join(sorted(new))}): "
                               f"cannot tell which one is {proc.name}; start {role}s one at a time")
        ((member, uri),) = new.items()
        if _ask_status(uri, self.hmac_key)["name"] != member:
            raise _NotYet(f"{uri} does not answer as {member}")
        return member

    def _listed(self, ns, proc, role):
        """Return once the dispatcher lists ``proc``'s name among its workers (or shards: ``role``)."""
        dispatcher = self.processes["dispatcher"]
        if not dispatcher.alive():
            raise RuntimeError(f"{proc.name} cannot join: the dispatcher exited with code "
                               f"{dispatcher.proc.returncode}; its last output:\n{dispatcher.tail()}")
        member = self.names[proc.name]
        if member not in self._dispatcher_status(ns)[role + "s"]:
            raise _NotYet(f"the dispatcher does not list {member} among its {role}s")

    def process_of(self, member):
        """The :class:`ManagedProcess` of the shard or worker registered as ``member``.

        Raises
        ------
        KeyError
            No process of this cluster registered under that name.
        """
        for name, registered in self.names.items():
            if registered == member:
                return self.processes[name]
        raise KeyError(f"no process of this cluster registered as {member!r} (known: {sorted(self.names.values())})")

    def workers(self):
        """Names of the worker processes still running."""
        return [name for name, p in self.processes.items() if name.startswith("worker-") and p.alive()]

    def close(self):
        """Stop every process: the workers and shards (and any other) at once, then the dispatcher,
        the name server last (the others unregister from it as they stop)."""
        def stage(name):
            return {"dispatcher": 1, "nameserver": 2}.get(name, 0)

        for group in range(3):
            procs = [p for name, p in self.processes.items() if stage(name) == group]
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.stop()

    def pids(self):
        """Process ids of every process started (running or not)."""
        return [p.pid for p in self.processes.values()]
