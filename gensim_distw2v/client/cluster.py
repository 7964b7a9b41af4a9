"""``LocalCluster``: a name server, a dispatcher, P parameter shards and N workers as subprocesses on loopback.

    >>> from gensim_distw2v import LocalCluster, Word2Vec
    >>> with LocalCluster(n_workers=2, threads_per_worker=1) as cluster:   # doctest: +SKIP
    ...     model = Word2Vec(sentences, distributed=True, ns_conf=cluster.ns_conf)

Every process logs at INFO into a pipe that is read line by line (see
``cluster.processes[name].output()``); start-up is judged by the processes' own "ready" and
"registered" log lines, never by sleeping. On exit (also on an error or
Ctrl-C) every process is stopped; the children also die with their parent (Linux).
"""
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
from gensim_distw2v.io import transport

logger = logging.getLogger(__name__)

__all__ = ["LocalCluster", "ManagedProcess"]


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

    def stop(self, timeout=5.0):
        """SIGTERM, then SIGKILL after ``timeout`` seconds."""
        if self.alive():
            self.proc.terminate()
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
        users cannot talk to it or register fake servers in its name server. ``False``: no key (any
        local user can then drive the cluster; see the docs' Security page).
    status_port : int, optional
        The dispatcher serves its live status page on this port of 127.0.0.1 (0: any free port);
        :attr:`status_url` says where. None (the default): no page.

    Attributes
    ----------
    ns_conf : dict
        Pass it to ``Word2Vec(distributed=True, ns_conf=...)``.
    processes : dict of (str, ManagedProcess)
        ``nameserver``, ``dispatcher``, ``shard-0``..., ``worker-0``...
    status_url : str or None
        The status page's address (``http://127.0.0.1:PORT/``; its JSON at ``status.json``), once started.
    """

    def __init__(self, n_workers=2, threads_per_worker=1, worker_timeout=30.0, hmac_key=None, client_timeout=120.0,
                 n_shards=1, job_deadline=120.0, status_port=None):
        if n_workers < 0 or threads_per_worker < 1 or n_shards < 0:
            raise ValueError("n_workers and n_shards must be >= 0 and threads_per_worker >= 1")
        self.n_workers, self.threads_per_worker, self.n_shards = n_workers, threads_per_worker, n_shards
        self.worker_timeout, self.client_timeout, self.job_deadline = worker_timeout, client_timeout, job_deadline
        self.hmac_key = None if hmac_key is False else transport.as_key(hmac_key or secrets.token_urlsafe(32))
        self.processes = {}
        self.ns_conf = None
        self.status_port, self.status_url = status_port, None
        self._next_worker = self._next_shard = 0

    def _env(self):
        env = dict(os.environ)
        # the children import the very gensim_distw2v this process imported
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(gensim_distw2v.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONUNBUFFERED"] = "1"
        env.pop(transport.HMAC_ENV, None)
        env.pop("PYRO_HMAC_KEY", None)
        if self.hmac_key:
            env[transport.HMAC_ENV] = env["PYRO_HMAC_KEY"] = self.hmac_key.decode("utf8")
        return env

    def _start(self, name, args, ready, timeout=60.0):
        proc = ManagedProcess(name, [sys.executable, "-P"] + args, env=self._env())
        self.processes[name] = proc
        match = proc.wait_for(ready, timeout=timeout)
        logger.debug("%s started (pid %i)", name, proc.pid)
        return match

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
        """Start the name server, the dispatcher, the shards and the workers; return when all are registered."""
        port = transport.free_port()
        self._start("nameserver", ["-m", "gensim_distw2v.nameserver", "-n", "127.0.0.1", "-p", str(port)],
                    r"gensim_distw2v\.nameserver ready at")
        self.ns_conf = {"host": "127.0.0.1", "port": port}
        if self.hmac_key:
            self.ns_conf["hmac_key"] = self.hmac_key
        self.start_dispatcher()
        for _ in range(self.n_shards):
            self.add_shard()
        for _ in range(self.n_workers):
            self.add_worker()
        return self

    def start_dispatcher(self):
        """Start the dispatcher (again, after it stopped or was killed); return once it is registered."""
        old = self.processes.get("dispatcher")
        if old is not None and old.alive():
            raise RuntimeError("the dispatcher is still running: stop or kill it first")
        page = [] if self.status_port is None else ["--status-port", str(self.status_port)]
        self._start("dispatcher", ["-m", "gensim_distw2v.dispatcher", "--ns-port", str(self.ns_conf["port"]),
                                   "--worker-timeout", str(self.worker_timeout),
                                   "--client-timeout", str(self.client_timeout),
                                   "--job-deadline", str(self.job_deadline)] + page,
                    r"gensim_distw2v\.dispatcher ready at")
        if page:
            self.status_url = self.processes["dispatcher"].wait_for(r"status page at (http://\S+)", timeout=10.0).group(1)

    def add_worker(self, wait=True):
        """Start one more worker; with ``wait``, return once the dispatcher has registered it.

        Returns
        -------
        str
            The worker's process name in :attr:`processes` (``worker-N``).
        """
        self._next_worker += 1
        return self._add("worker", self._next_worker - 1, ["--threads", str(self.threads_per_worker)], wait)

    def add_shard(self, wait=True):
        """Start one more parameter shard; with ``wait``, return once the dispatcher has registered it.

        Returns
        -------
        str
            The shard's process name in :attr:`processes` (``shard-N``).
        """
        self._next_shard += 1
        return self._add("shard", self._next_shard - 1, [], wait)

    def _add(self, role, number, extra, wait):
        """Start ``python -m gensim_distw2v.<role>`` as ``<role>-<number>``; with ``wait``, return once
        the dispatcher logged it registered."""
        name = f"{role}-{number}"
        dispatcher = self.processes["dispatcher"]
        mark = len(dispatcher.lines)
        match = self._start(name, ["-m", f"gensim_distw2v.{role}", "--ns-port", str(self.ns_conf["port"])] + extra,
                            rf"gensim_distw2v\.{role} (\S+) ready at")
        if wait:
            dispatcher.wait_for(rf"{role} {re.escape(match.group(1))} registered", timeout=60.0, start=mark)
        return name

    def workers(self):
        """Names of the worker processes still running."""
        return [name for name, p in self.processes.items() if name.startswith("worker-") and p.alive()]

    def close(self):
        """Stop every process (workers first, then shards, the name server last)."""
        for name in sorted(self.processes, key=lambda n: (n == "nameserver", n == "dispatcher", n.startswith("shard"),
                                                          n)):
            self.processes[name].stop()

    def pids(self):
        """Process ids of every process started (running or not)."""
        return [p.pid for p in self.processes.values()]
