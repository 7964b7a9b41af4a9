"""``python -m gensim_distw2v.worker``: the worker's command line (options, start, serve until stopped)."""
import logging

from gensim_distw2v import options
from gensim_distw2v.io import endpoints, serving, transport
from gensim_distw2v.io.keys import read_hmac_key
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.worker import service
from gensim_distw2v.worker.service import Worker

logger = logging.getLogger("gensim_distw2v.worker")


def build_parser():
    """The command line's parser: :class:`gensim_distw2v.options.WorkerOptions`' options."""
    return options.parser(options.WorkerOptions, "python -m gensim_distw2v.worker", service.__doc__.split("\n\n")[0])


def main(argv=None):
    """``python -m gensim_distw2v.worker``: serve until killed."""
    parser = build_parser()
    opts = options.parse(parser, options.WorkerOptions, argv)
    logging.basicConfig(format="%(asctime)s : %(processName)s : %(levelname)s : %(message)s", level=opts.log_level)
    try:
        key = read_hmac_key(opts.hmac_key_file)
        worker = Worker(opts.ns_conf(), hmac_key=key, **opts.role_kwargs())
        server = transport.Server(endpoints.endpoint(Worker.TABLE, worker), worker.name, host=opts.host, port=opts.port,
                                  ns_conf=opts.ns_conf(), hmac_key=key, limits=opts.limits())
    except (ClusterError, ValueError, OSError) as err:
        parser.exit(2, f"error: {err}\n")
    worker.uri = server.uri
    serving.serve_member(server, worker, "gensim_distw2v.worker %s ready at %s with %i threads", worker.name,
                           server.uri, worker.threads)
    logger.info("gensim_distw2v.worker %s stopped", worker.name)
