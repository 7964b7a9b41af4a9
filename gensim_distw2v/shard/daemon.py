"""``python -m gensim_distw2v.shard``: the shard's command line (options, start, serve until stopped)."""
import argparse
import logging

from gensim_distw2v.io import transport
from gensim_distw2v.shard import service
from gensim_distw2v.shard.service import Shard, cap_malloc_arenas

logger = logging.getLogger("gensim_distw2v.shard")


def main(argv=None):
    """``python -m gensim_distw2v.shard``: serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v.shard", description=service.__doc__.split("\n\n")[0])
    transport.add_server_arguments(parser)
    parser.add_argument("--max-model-bytes", type=int, default=None,
                        help="the most a session's rows may take on this shard (default: half this machine's memory)")
    parser.add_argument("--heartbeat", type=float, default=1.0,
                        help="seconds between heartbeats, in (0, 5] (default 1; the dispatcher waits at most 5 s)")
    args = parser.parse_args(argv)
    if args.max_model_bytes is not None and args.max_model_bytes < 1:
        parser.error("--max-model-bytes must be >= 1")
    if not 0 < args.heartbeat <= 5:
        parser.error(f"--heartbeat must be in (0, 5] seconds (the dispatcher waits at most 5 s), got {args.heartbeat}")
    cap_malloc_arenas()  # before any thread starts
    logging.basicConfig(format="%(asctime)s : %(processName)s : %(levelname)s : %(message)s", level=args.log_level)
    try:
        key = transport.read_hmac_key(args.hmac_key_file)
        shard = Shard({"host": args.ns_host, "port": args.ns_port}, hmac_key=key, heartbeat=args.heartbeat,
                      max_model_bytes=args.max_model_bytes)
        server = transport.Server(shard, shard.name, host=args.host, port=args.port,
                                  ns_conf={"host": args.ns_host, "port": args.ns_port}, hmac_key=key,
                                  limits=transport.limits_from_args(args))
    except (transport.ClusterError, ValueError, OSError) as err:
        parser.exit(2, f"error: {err}\n")
    shard.uri = server.uri
    transport.serve_member(server, shard, "gensim_distw2v.shard %s ready at %s", shard.name, server.uri)
    logger.info("gensim_distw2v.shard %s stopped", shard.name)
