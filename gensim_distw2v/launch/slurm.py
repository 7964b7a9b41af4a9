"""SLURM: one cluster of an allocation's nodes, one ``srun`` task per node
(``srun gensim-distw2v cluster --slurm``, or ``train ... --slurm``).

Every task reads its rank and the allocation's nodes from SLURM's environment (``SLURM_PROCID``,
``SLURM_JOB_NODELIST`` through ``scontrol show hostnames``, each node's address from ``scontrol
show node``). Rank 0 makes the cluster's key and writes it to a file of mode 0600 in a folder the
nodes share (``--key-dir``, default the job's submit folder), written whole under a temporary name
and renamed; the other ranks wait for that file, check it is theirs and private, and read it. Each
task then runs its node's servers as a launcher's agent does (:class:`gensim_distw2v.launch.agent.Agent`,
in process): rank 0 the name server, the dispatcher, a shard and a worker; the others a shard and a
worker (``--shards-per-host N``: N shards on each node). Rank 0 waits until every member has joined,
then removes the key file; the others serve until the step is cancelled (``scancel``: SIGTERM) or
rank 0's name server is gone for good (its ``train`` finished). Every rank removes the key file on its way out, should it still be there.
"""
import argparse
import dataclasses
import logging
import os
import secrets
import stat
import subprocess
import time

from gensim_distw2v.io import keys, transport
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.launch.agent import Agent
from gensim_distw2v.launch.events import LaunchError

logger = logging.getLogger(__name__)

__all__ = ["Allocation", "SlurmCluster", "allocation"]

KEY_WAIT = 120.0  # seconds the other ranks wait for rank 0's key file
GONE_AFTER = 60.0  # seconds rank 0's name server may be unreachable before the others stop (a short cut is no end)


@dataclasses.dataclass(frozen=True)
class Allocation:
    """This task's view of the allocation: its ``rank`` of ``size``, the ``nodes`` (names, in
    SLURM's order: the first runs the scheduler), this task's ``node``, the job's id and the CPUs
    this task may use."""

    rank: int
    size: int
    nodes: tuple
    node: str
    job: str  # the job's id, the step's and the job's restarts: ``job.step.restarts``
    cpus: int
    submit_dir: str


def _run(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LaunchError(f"{' '.join(argv)} failed ({err}): is this a SLURM step (srun) with SLURM's commands on "
                          f"the PATH?") from None
    if out.returncode:
        raise LaunchError(f"{' '.join(argv)} failed ({out.stderr.strip()[-500:]}): is this a SLURM step "
                          f"(srun) with SLURM's commands on the PATH?")
    return out.stdout


def allocation(env=None):
    """The :class:`Allocation` of SLURM's environment; LaunchError naming what is missing."""
    env = os.environ if env is None else env
    missing = [name for name in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
                                 "SLURMD_NODENAME") if name not in env]
    if missing:
        raise LaunchError(f"--slurm: {', '.join(missing)} not set: run it as one task per node of an allocation, "
                          f"e.g. srun --ntasks-per-node=1 gensim-distw2v cluster --slurm (docs/cluster.rst)")
    # the step's nodes (a step may run on part of the allocation), else the job's
    nodes = tuple(_run(["scontrol", "show", "hostnames", env.get("SLURM_STEP_NODELIST")
                        or env["SLURM_JOB_NODELIST"]]).split())
    size = int(env["SLURM_NTASKS"])
    if size != len(nodes):
        raise LaunchError(f"--slurm: {size} tasks on {len(nodes)} nodes: run one task per node (srun "
                          f"--ntasks-per-node=1)")
    cpus = int(env.get("SLURM_CPUS_PER_TASK") or env.get("SLURM_CPUS_ON_NODE") or os.cpu_count() or 2)
    if (int(env["SLURM_PROCID"]) == 0) != (env["SLURMD_NODENAME"] == nodes[0]):
        raise LaunchError(f"--slurm: rank 0 must run on the step's first node ({nodes[0]}): use SLURM's default task "
                          f"distribution (block), one task per node")
    step = f"{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}.{env.get('SLURM_RESTART_COUNT', '0')}"
    return Allocation(rank=int(env["SLURM_PROCID"]), size=size, nodes=nodes, node=env["SLURMD_NODENAME"],
                      job=step, cpus=cpus, submit_dir=env.get("SLURM_SUBMIT_DIR", os.getcwd()))


def node_address(name):
    """A node's address as SLURM knows it (its ``NodeAddr``)."""
    for field in _run(["scontrol", "show", "node", "-o", name]).split():
        if field.startswith("NodeAddr="):
            return field.split("=", 1)[1]
    return name


def key_file(folder, alloc):
    """Where rank 0 writes the step's key in ``folder``."""
    return os.path.join(folder, f".gensim-distw2v-{alloc.job}.key")


def shared_key(folder, alloc):
    """The cluster's key: made by rank 0 and written to ``folder`` (mode 0600), read by the others."""
    path = key_file(folder, alloc)
    if alloc.rank == 0:
        key = secrets.token_urlsafe(32)
        temporary = f"{path}.{os.getpid()}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as fout:
            fout.write(key)
        os.rename(temporary, path)
        return key, path
    deadline = time.monotonic() + KEY_WAIT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise LaunchError(f"--slurm: rank 0's key file {path} did not appear within {KEY_WAIT:.0f} s: is "
                              f"--key-dir a folder every node shares?")
        time.sleep(0.2)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise LaunchError(f"--slurm: cannot read the key file {path} ({err})") from None
    with os.fdopen(fd) as fin:
        found = os.fstat(fin.fileno())
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o077:
            raise LaunchError(f"--slurm: the key file {path} is not this user's private file: refused")
        return fin.read(4096).strip(), path


class SlurmCluster:
    """This node's part of the allocation's cluster (see the module's docstring).

    Parameters
    ----------
    key_dir : str, optional
        Where rank 0 writes the key (a folder the nodes share; default the submit folder).
    ns_port : int
        The name server's port on rank 0's node.
    threads : int
        The worker's trainer threads (0: the task's CPUs less one).
    log_level : str
        The servers' ``--log-level``.
    corpus_dir : str, optional
        The workers' ``--corpus-dir`` (the only folders whose files they read as corpora).
    """

    def __init__(self, key_dir=None, ns_port=keys.DEFAULT_NS_PORT, threads=0, log_level="WARNING",
                 corpus_dir=None, shards_per_host=1):
        self.alloc = allocation()
        self.key_dir = key_dir or self.alloc.submit_dir
        self.ns_port, self.threads, self.log_level, self.corpus_dir = ns_port, threads, log_level, corpus_dir
        self.agent, self.key_path, self.ns_conf = None, None, None
        self.shards_per_host = int(shards_per_host)

    @property
    def rank(self):
        return self.alloc.rank

    def start(self):
        """Start this node's servers; rank 0 returns once every node's worker and shard joined."""
        from gensim_distw2v.launch.cluster import wait_for_members

        alloc = self.alloc
        scheduler, here = node_address(alloc.nodes[0]), node_address(alloc.node)
        self.key_path = key_file(self.key_dir, alloc)  # (removed on the way out, even if stopped before reading it)
        key = shared_key(self.key_dir, alloc)[0]
        self.ns_conf = {"host": scheduler, "port": self.ns_port, "hmac_key": key}
        roles = (["nameserver", "dispatcher"] if alloc.rank == 0 else []) + ["shard", "worker"]
        args = argparse.Namespace(host=here, ns_host=scheduler, ns_port=self.ns_port, log_level=self.log_level,
                                  corpus_dir=self.corpus_dir, shards=self.shards_per_host,
                                  threads=self.threads or max(1, alloc.cpus - 1), label=f"{alloc.node} (rank "
                                                                                         f"{alloc.rank})")
        self.agent = Agent(args, key)
        try:
            if alloc.rank:
                self._wait_for_name_server()  # (a shard or a worker started before it would give up)
            self.agent.start(roles)
            if alloc.rank == 0:
                wait_for_members(self.ns_conf, alloc.size, check=self._check, shards=alloc.size * self.shards_per_host)
                os.remove(self.key_path)  # every node has read it (each joined with it): on disk no longer
        except BaseException:
            self.close()
            raise
        return self

    def _wait_for_name_server(self):
        deadline = time.monotonic() + KEY_WAIT
        while True:
            try:
                transport.release(transport.locate_ns(self.ns_conf, timeout=2.0))
                return
            except (ClusterError, transport.PyroError, OSError) as err:
                if time.monotonic() > deadline or self.agent.stopped.is_set():
                    raise LaunchError(f"{alloc_label(self.alloc)}: rank 0's name server at {self.ns_conf['host']}:"
                                      f"{self.ns_conf['port']} did not answer within {KEY_WAIT:.0f} s ({err})") from None
            time.sleep(0.5)

    def _check(self):
        gone = self.agent.watch(once=True)
        return {} if gone is None else {alloc_label(self.alloc): f"its {gone.role} exited with code {gone.code}"}

    def serve(self):
        """Until stopped, or (not rank 0) rank 0's name server gone for :data:`GONE_AFTER` seconds."""
        last_seen = time.monotonic()
        while not self.agent.stopped.wait(1.0):
            gone = self.agent.watch(once=True)
            if gone is not None:
                raise LaunchError(f"{alloc_label(self.alloc)}: its {gone.role} exited with code {gone.code}: "
                                  f"{gone.message[-1000:]}")
            if self.rank:
                try:
                    transport.release(transport.locate_ns(self.ns_conf, timeout=2.0))
                    last_seen = time.monotonic()
                except (ClusterError, transport.PyroError, OSError):
                    if time.monotonic() - last_seen > GONE_AFTER:
                        logger.info("rank 0's name server is gone: this node's part of the cluster stops")
                        return

    def close(self):
        """Stop this node's servers and remove the key file if it is still there. Any rank removes it:
        a rank that ends, ends the cluster (rank 0 gone, or a member lost before everyone joined, which
        fails rank 0's wait), so nobody needs the key again, and rank 0 killed (-9) before everyone
        joined cannot remove it itself."""
        if self.agent is not None:
            self.agent.stop()
        if self.key_path:
            try:
                os.remove(self.key_path)
            except FileNotFoundError:
                pass


def alloc_label(alloc):
    return f"node {alloc.node} (rank {alloc.rank})"
