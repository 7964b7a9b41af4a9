"""The launcher's command line: ``gensim-distw2v cluster --hosts ...`` (start a cluster over SSH,
stay in the foreground, stop it everywhere on Ctrl-C), and the options ``train --hosts ...`` shares."""
import json
import logging
import os
import signal
import sys
import time

from gensim_distw2v.io import keys, transport
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.io.store import private_dir
from gensim_distw2v.launch.cluster import SCHEDULER, RemoteCluster, dispatcher_status
from gensim_distw2v.launch.agent import MAX_SHARDS_PER_HOST
from gensim_distw2v.launch.events import LaunchError
from gensim_distw2v.launch.hosts import parse_hosts
from gensim_distw2v.launch.ssh import SshRunner

logger = logging.getLogger("gensim_distw2v.launch")

DEFAULT_FOLDER = "~/.gensim_distw2v"  # where the ns_conf goes without --ns-conf-file

__all__ = ["add_arguments", "cluster_command", "interrupt", "remote_cluster", "slurm_cluster", "write_private"]


def add_arguments(group):
    """The launcher's options, on an argparse group."""
    group.add_argument("--hosts", help="start the cluster over SSH on these hosts: HOST[:THREADS][,HOST...] (a "
                                       "worker and --shards-per-host shards on each; threads: default the host's "
                                       "cores less one)")
    group.add_argument("--slurm", action="store_true",
                       help="one cluster of the SLURM allocation's nodes: run as one task per node (srun "
                            "--ntasks-per-node=1 ...); rank 0 also runs the name server and the dispatcher")
    group.add_argument("--key-dir", help="--slurm: a folder every node shares, where rank 0 writes the cluster's "
                                         "key (mode 0600; default: the job's submit folder)")
    group.add_argument("--scheduler-host", help="where the name server and the dispatcher run (default: the first "
                                                "of --hosts)")
    group.add_argument("--ssh-port", type=int, help="ssh -p on every host")
    group.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                       help="ssh -o OPT on every host (repeatable: IdentityFile=..., UserKnownHostsFile=..., "
                            "StrictHostKeyChecking=accept-new; the hosts' keys are always checked)")
    group.add_argument("--python", default="python3",
                       help="the interpreter on every host (a virtualenv's bin/python with gensim_distw2v)")
    group.add_argument("--cluster-ns-port", type=int, default=keys.DEFAULT_NS_PORT,
                       help="the name server's port on the scheduler's host")
    group.add_argument("--cluster-log-level", default="WARNING", help="the servers' --log-level")
    group.add_argument("--shards-per-host", type=int, default=1, choices=range(1, MAX_SHARDS_PER_HOST + 1), metavar="N",
                       help="--hosts / --slurm: parameter shards on each host (default 1; 2 gives a node's cores two "
                            "fold threads where many nodes' rounds come to each shard: docs/scaling.rst)")
    group.add_argument("--corpus-dir", metavar="DIR[:DIR...]",
                       help="the workers' --corpus-dir: the only folders whose files they read as corpora (default: "
                            "any file; give it beyond loopback)")


def remote_cluster(args):
    """A :class:`RemoteCluster` of the options (not started); SystemExit naming a malformed one."""
    try:
        hosts = parse_hosts(args.hosts)
        scheduler = parse_hosts(args.scheduler_host)[0] if args.scheduler_host else None
    except ValueError as err:
        sys.exit(f"error: {err}")
    try:
        runner = SshRunner(port=args.ssh_port, options=args.ssh_option, python=args.python)
    except LaunchError as err:
        sys.exit(f"error: {err}")
    return RemoteCluster(hosts, runner, scheduler, ns_port=args.cluster_ns_port, log_level=args.cluster_log_level,
                         corpus_dir=args.corpus_dir, shards_per_host=args.shards_per_host)


def write_private(path, text):
    """Write ``text`` to ``path``, readable by this user only (``0600``), never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fout:
        os.fchmod(fout.fileno(), 0o600)
        fout.write(text)


def _members(status):
    return f"{len(status.workers)} workers ({sum(m.threads for m in status.workers.values())} threads), " \
           f"{len(status.shards)} shards"


def interrupt(*_ignored):
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: stop everything on the way out


def slurm_cluster(args):
    """This node's :class:`~gensim_distw2v.launch.slurm.SlurmCluster` of the options (not started)."""
    from gensim_distw2v.launch.slurm import SlurmCluster

    return SlurmCluster(key_dir=args.key_dir, ns_port=args.cluster_ns_port, log_level=args.cluster_log_level,
                        corpus_dir=args.corpus_dir, shards_per_host=args.shards_per_host)


def _announce(ns_conf, ns_conf_file, what):
    """Print the cluster's ``ns_conf`` without its key, which goes to ``ns_conf_file`` (mode 0600;
    default ``~/.gensim_distw2v/ns_conf.json``, in a folder of mode 0700): never to the output,
    which a batch system writes to a file others may read."""
    if not ns_conf_file:
        ns_conf_file = os.path.join(private_dir(os.path.expanduser(DEFAULT_FOLDER), "the launcher's folder"),
                                    "ns_conf.json")
    write_private(ns_conf_file, json.dumps(ns_conf) + "\n")
    shown = dict(ns_conf, hmac_key=f"<in {ns_conf_file}>")
    print(f"cluster up on {what}", flush=True)
    print(f"ns_conf = {json.dumps(shown)}", flush=True)
    print("Word2Vec(distributed=True, ns_conf=json.load(open(NS_CONF_FILE))) trains on it; Ctrl-C (scancel) stops "
          "it everywhere", flush=True)


def _foreground(cluster, serve, stopping):
    """Start ``cluster``, then ``serve()`` until it returns, Ctrl-C or SIGTERM (``stopping`` is said
    then), or a lost part; stop the cluster however it ends. Returns the exit code."""
    signal.signal(signal.SIGTERM, interrupt)
    code = 0
    try:
        cluster.start()
        serve()
    except KeyboardInterrupt:
        print(stopping, flush=True)
    except (LaunchError, ClusterError, transport.PyroError) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        code = 1
    finally:
        cluster.close()
        print("stopped", flush=True)
    return code


def slurm_command(args):
    """``srun gensim-distw2v cluster --slurm``: this node's part; rank 0 prints the ``ns_conf``."""
    try:
        cluster = slurm_cluster(args)
    except LaunchError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2

    def serve():
        if cluster.rank == 0:
            _announce(cluster.ns_conf, args.ns_conf_file, f"{cluster.alloc.size} nodes of job {cluster.alloc.job}: "
                                                          f"{_members(dispatcher_status(cluster.ns_conf))}")
        cluster.serve()
    return _foreground(cluster, serve, "stopping this node's part of the cluster")


def cluster_command(args):
    """``gensim-distw2v cluster``: start, print the ``ns_conf``, show the members until Ctrl-C (or
    SIGTERM, or the scheduler's host is lost), then stop every process on every host."""
    if bool(args.hosts) == bool(args.slurm):
        print("error: give --hosts HOST[,HOST...] (over SSH) or --slurm (inside an allocation)", file=sys.stderr)
        return 2
    if args.slurm:
        return slurm_command(args)
    cluster = remote_cluster(args)

    def serve():
        _announce(cluster.ns_conf, args.ns_conf_file, f"{len(cluster.hosts)} hosts: {_members(cluster.status())}")
        last = None
        while True:
            for label, why in cluster.check().items():
                if label == SCHEDULER:
                    raise LaunchError(f"lost the scheduler's host ({why}): the cluster cannot go on")
                logger.error("lost %s; its processes are stopped, the others go on", why)
            members = _members(cluster.status())
            if members != last:
                print(f"members: {members}", flush=True)
                last = members
            time.sleep(1.0)
    return _foreground(cluster, serve, "stopping the cluster on every host")
