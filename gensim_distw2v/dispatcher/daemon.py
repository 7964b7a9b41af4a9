"""``python -m gensim_distw2v.dispatcher``: the dispatcher's command line (options, start, serve until stopped)."""
import argparse
import logging

from gensim_distw2v.io import transport
from gensim_distw2v.io.statuspage import StatusPage
from gensim_distw2v.dispatcher import service
from gensim_distw2v.dispatcher.service import Dispatcher, JOB_DEADLINE_ROUNDS

logger = logging.getLogger("gensim_distw2v.dispatcher")


def main(argv=None):
    """``python -m gensim_distw2v.dispatcher``: serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v.dispatcher", description=service.__doc__.split("\n\n")[0])
    transport.add_server_arguments(parser)
    parser.add_argument("--worker-timeout", type=float, default=30.0,
                        help="seconds without a heartbeat before a worker is dropped (default 30)")
    parser.add_argument("--client-timeout", type=float, default=120.0,
                        help="seconds without a call before a client's session is aborted (default 120)")
    parser.add_argument("--job-deadline", type=float, default=120.0,
                        help=f"seconds a worker may hold jobs without merging them (at least {JOB_DEADLINE_ROUNDS} "
                             f"typical rounds) before it is dropped and its jobs re-queued (default 120)")
    parser.add_argument("--max-model-bytes", type=int, default=None,
                        help="largest session's arrays held here (default: half this machine's memory)")
    parser.add_argument("--status-port", type=int, default=None,
                        help="serve a read-only HTTP status page (and /status.json) on this port (0: any free "
                             "port; default: none)")
    parser.add_argument("--status-host", default="127.0.0.1",
                        help="address of the status page (default 127.0.0.1; the page has no authentication)")
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s : %(processName)s : %(levelname)s : %(message)s", level=args.log_level)
    try:
        key = transport.read_hmac_key(args.hmac_key_file)
        if args.job_deadline <= 0 or (args.max_model_bytes is not None and args.max_model_bytes < 1):
            raise ValueError("--job-deadline must be > 0 seconds and --max-model-bytes >= 1")
        if args.status_port is not None and not 0 <= args.status_port <= 65535:
            raise ValueError(f"--status-port must be a TCP port in [0, 65535], got {args.status_port}")
        dispatcher = Dispatcher(worker_timeout=args.worker_timeout, client_timeout=args.client_timeout,
                                job_deadline=args.job_deadline, max_model_bytes=args.max_model_bytes)
        server = transport.Server(dispatcher, transport.DISPATCHER_NAME, host=args.host, port=args.port,
                                  ns_conf={"host": args.ns_host, "port": args.ns_port}, hmac_key=key,
                                  on_disconnect=dispatcher.connection_closed,
                                  limits=transport.limits_from_args(args))
        dispatcher.uri = server.uri
        page = None if args.status_port is None else StatusPage(dispatcher.overview, args.status_host, args.status_port)
        if page is not None:
            page.start()  # it logs where it is
    except (transport.ClusterError, ValueError, OSError) as err:
        parser.exit(2, f"error: {err}\n")
    try:
        transport.serve_until_stopped(server, dispatcher.shutdown,
                                      on_ready=lambda: logger.info("gensim_distw2v.dispatcher ready at %s", server.uri))
    finally:
        if page is not None:
            page.stop()
    logger.info("gensim_distw2v.dispatcher stopped")
