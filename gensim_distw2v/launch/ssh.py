"""Agents started over OpenSSH (:mod:`gensim_distw2v.launch.agent` on each host): the ``ssh``
command line (the user's keys, agent and ``~/.ssh/config``; a port, ``-o`` options, the hosts'
interpreter), the key sent on the agent's standard input and that input held open with a line
every few seconds (its end, or its silence, stops the host's part), the agent's events read back,
and what a failure means, in words naming the host and the fix.
"""
import collections
import json
import logging
import os
import queue
import shlex
import subprocess
import threading
import time

from gensim_distw2v.launch.events import BEAT_SECONDS, Event, LaunchError

logger = logging.getLogger(__name__)

__all__ = ["AgentLink", "SshRunner"]

SSH_CONNECT_TIMEOUT = 10  # seconds ssh may take to connect (a host that drops packets fails in this, not in minutes)
ALIVE_INTERVAL = 5  # seconds between ssh's keepalives: a link cut without a word ends in 3 of them
AGENT_STOP_SECONDS = 10.0  # an agent's time to stop its host's processes once its input closes


class AgentLink:
    """One host's agent, as a child process of the launcher (``ssh``, or the agent itself).

    Parameters
    ----------
    label : str
        The host, as messages name it.
    argv : list of str
        The command that runs the agent.
    hello : dict
        Its first line of input: ``{"key": ..., "versions": ...}``.
    """

    def __init__(self, label, argv, hello):
        self.label, self.argv = label, argv
        self.events = queue.Queue()
        self.stderr = collections.deque(maxlen=40)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, start_new_session=True)
        try:
            self.proc.stdin.write(json.dumps(hello) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it exited at once (a bad option, say): why_gone() says so, from its standard error
        except BaseException:
            self.proc.kill()
            raise
        self._closed, self._input = threading.Event(), threading.Lock()
        self._threads = [threading.Thread(target=self._read_events, daemon=True, name=f"agent-{label}"),
                         threading.Thread(target=self._read_stderr, daemon=True, name=f"agent-{label}-stderr")]
        for thread in self._threads:
            thread.start()
        threading.Thread(target=self._beat, daemon=True, name=f"agent-{label}-beat").start()

    def _beat(self):
        """An empty line every :data:`BEAT_SECONDS` until its input closes: the agent stops its host's part
        when they stop coming (a cut network)."""
        while not self._closed.wait(BEAT_SECONDS):
            with self._input:
                if self._closed.is_set():
                    return
                try:
                    self.proc.stdin.write("\n")
                    self.proc.stdin.flush()
                except (OSError, ValueError):  # it exited: why_gone() says why
                    return

    def _read_events(self):
        for line in self.proc.stdout:
            try:
                self.events.put(Event.from_line(line))
            except ValueError:
                self.stderr.append(line.rstrip("\n"))  # (a login banner, say)
        self.events.put(None)  # its output closed: it exited

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def alive(self):
        return self.proc.poll() is None

    def wait_event(self, timeout):
        """The agent's next event; :class:`LaunchError` naming the host if it exits first (or sends
        ``error``), or says nothing within ``timeout`` seconds."""
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise LaunchError(f"host {self.label}: no word from it within {timeout:.0f} s") from None
        if event is None:
            self.events.put(None)
            raise LaunchError(self.why_gone())
        if event.kind == "error":
            raise LaunchError(event.message)
        return event

    def why_gone(self):
        """What its end means, in words naming the host and the fix."""
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        for thread in self._threads:
            thread.join(2.0)
        said = "\n".join(self.stderr).strip()
        last = said.splitlines()[-1] if said else ""
        if code == 255 and self.argv[0] == "ssh" and "host key verification failed" in said.lower():
            return (f"host {self.label}: its host key is not the one known_hosts holds for it, or is unknown "
                    f"({last}); if the host is yours and its key changed, check its fingerprint and update "
                    f"known_hosts (ssh-keygen -R, then ssh-keyscan), or give --ssh-option UserKnownHostsFile=...")
        if code == 255 and self.argv[0] == "ssh":
            return (f"host {self.label}: cannot reach it over SSH ({last or 'ssh exited with 255'}); check the "
                    f"address, --ssh-port, your key (--ssh-option IdentityFile=...) and that sshd runs there")
        if "No module named" in said and "gensim_distw2v" in said:
            return (f"host {self.label}: its Python has no gensim_distw2v ({last}); install it there (pip install "
                    f"gensim_distw2v), or give --python the interpreter of a virtualenv that has it")
        if code == 127:
            return f"host {self.label}: no such interpreter there ({last}); give --python its path on that host"
        return f"host {self.label}: its agent exited with code {code}" + (f": {said[-2000:]}" if said else "")

    def close_input(self):
        """Close its input: the agent stops its host's processes and exits (:meth:`stop` waits for it)."""
        self._closed.set()
        with self._input:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def stop(self, timeout=AGENT_STOP_SECONDS):
        """Close its input and wait for the agent to exit; kill it past ``timeout`` seconds."""
        self.close_input()
        try:
            self.proc.wait(max(0.0, timeout))
        except subprocess.TimeoutExpired:
            logger.warning("host %s: its agent did not stop within %.0f s; killing the connection", self.label,
                           timeout)
            self.proc.kill()
            self.proc.wait()


#: the values of ``StrictHostKeyChecking`` that turn the check off (OpenSSH's readconf.c reads all three so)
NO_CHECK = ("no", "off", "false")


def _option(option):
    """An ``ssh -o`` option's ``(name, value)``, the name lower-cased, the value unquoted."""
    name, _, value = option.replace("=", " ", 1).partition(" ")
    return name.strip().lower(), value.strip().strip('"')


def unchecked_host_keys(options):
    """Refuse ``ssh -o`` options that let any host answer for the one named: ``StrictHostKeyChecking`` ``no``,
    ``off`` or ``false``, or ``accept-new`` with ``UserKnownHostsFile=/dev/null`` (no key is ever remembered,
    so every key is new and accepted); the cluster's key goes down the connection, so whoever answers would
    hold it.

    Raises
    ------
    LaunchError
        Naming the option and the fix.
    """
    fix = ("the cluster's key travels over these SSH connections, so the hosts' keys must be checked; add the "
           "hosts to known_hosts (ssh-keyscan, then check the fingerprints) or trust each host's key the first "
           "time with --ssh-option StrictHostKeyChecking=accept-new")
    parsed = [(_option(option), option) for option in options]
    for (name, value), option in parsed:
        if name == "stricthostkeychecking" and value.lower() in NO_CHECK:
            raise LaunchError(f"--ssh-option {option}: {fix}")
    accept_new = any(name == "stricthostkeychecking" and value.lower() == "accept-new" for (name, value), _ in parsed)
    for (name, value), option in parsed:
        if accept_new and name == "userknownhostsfile" and os.path.realpath(value) == os.devnull:
            raise LaunchError(f"--ssh-option {option} with StrictHostKeyChecking=accept-new: no host key would be "
                              f"remembered, so any key is accepted; {fix}, into a known_hosts file that is kept")


class SshRunner:
    """Starts agents over ``ssh``.

    Parameters
    ----------
    port : int, optional
        ``ssh -p``.
    options : list of str
        ``ssh -o`` options (``IdentityFile=...``, ``UserKnownHostsFile=...``,
        ``StrictHostKeyChecking=accept-new``).
    python : str
        The interpreter on every host (a virtualenv's ``bin/python``).

    Raises
    ------
    LaunchError
        For an option that turns off the check of the hosts' keys: the cluster's key travels down
        these connections, so a host that is not the one named must not get it.
    """

    def __init__(self, port=None, options=(), python="python3"):
        unchecked_host_keys(options)
        self.port, self.options, self.python = port, list(options), python

    def argv(self, destination, agent_args):
        """The ``ssh`` command line that runs the agent with ``agent_args`` on ``destination``."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT}",
                "-o", f"ServerAliveInterval={ALIVE_INTERVAL}", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
        if self.port:
            argv += ["-p", str(self.port)]
        for option in self.options:
            argv += ["-o", option]
        remote = [self.python, "-m", "gensim_distw2v.launch.agent"] + list(agent_args)
        return argv + [destination, shlex.join(remote)]

    def start(self, host, agent_args, hello):
        """An :class:`AgentLink` to ``host``'s agent (a :class:`gensim_distw2v.launch.hosts.Host`)."""
        started = time.monotonic()
        link = AgentLink(host.label, self.argv(host.destination, agent_args), hello)
        logger.debug("host %s: ssh started in %.2f s", host.label, time.monotonic() - started)
        return link
