"""``python -m gensim_distw2v.worker``: the worker's command line (options, start, serve until stopped)."""
import argparse
import logging
import os

from gensim_distw2v.io import transport
from gensim_distw2v.worker import service
from gensim_distw2v.worker.service import Worker

logger = logging.getLogger("gensim_distw2v.worker")


def main(argv=None):
    """``python -m gensim_distw2v.worker``: serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v.worker", description=service.__doc__.split("\n\n")[0])
    transport.add_server_arguments(parser)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help=f"trainer threads (default: this node's cores, {os.cpu_count()})")
    parser.add_argument("--heartbeat", type=float, default=1.0,
                        help="seconds between heartbeats, in (0, 5] (default 1; the dispatcher waits at most 5 s)")
    args = parser.parse_args(argv)
    if not 0 < args.heartbeat <= 5:
        parser.error(f"--heartbeat must be in (0, 5] seconds (the dispatcher waits at most 5 s), got {args.heartbeat}")
    logging.basicConfig(format="%(asctime)s : %(processName)s : %(levelname)s : %(message)s", level=args.log_level)
    if args.threads < 1:
        parser.exit(2, "error: --threads must be >= 1\n")
    try:
        key = transport.read_hmac_key(args.hmac_key_file)
        worker = Worker({"host": args.ns_host, "port": args.ns_port}, threads=args.threads, hmac_key=key,
                        heartbeat=args.heartbeat)
        server = transport.Server(worker, worker.name, host=args.host, port=args.port,
                                  ns_conf={"host": args.ns_host, "port": args.ns_port}, hmac_key=key,
                                  limits=transport.limits_from_args(args))
    except (transport.ClusterError, ValueError, OSError) as err:
        parser.exit(2, f"error: {err}\n")
    worker.uri = server.uri
    transport.serve_member(server, worker, "gensim_distw2v.worker %s ready at %s with %i threads", worker.name,
                           server.uri, worker.threads)
    logger.info("gensim_distw2v.worker %s stopped", worker.name)
