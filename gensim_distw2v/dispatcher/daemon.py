"""``python -m gensim_distw2v.dispatcher``: the dispatcher's command line (options, start, serve until stopped)."""
import logging

from gensim_distw2v import build, options
from gensim_distw2v.dispatcher import service
from gensim_distw2v.dispatcher.service import Dispatcher
from gensim_distw2v.io import endpoints, serving, transport
from gensim_distw2v.io.keys import read_hmac_key
from gensim_distw2v.protocol.constants import DISPATCHER_NAME
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.io.statuspage import StatusPage

logger = logging.getLogger("gensim_distw2v.dispatcher")


def build_parser():
    """The command line's parser: :class:`gensim_distw2v.options.DispatcherOptions`' options."""
    return options.parser(options.DispatcherOptions, "python -m gensim_distw2v.dispatcher",
                          service.__doc__.split("\n\n")[0])


def main(argv=None):
    """``python -m gensim_distw2v.dispatcher``: serve until killed."""
    parser = build_parser()
    opts = options.parse(parser, options.DispatcherOptions, argv)
    logging.basicConfig(format="%(asctime)s : %(processName)s : %(levelname)s : %(message)s", level=opts.log_level)
    try:
        # the kernel checks every session's arrays here: load it (and gensim) now, not in the first session
        build.check()
        key = read_hmac_key(opts.hmac_key_file)
        dispatcher = Dispatcher(hmac_key=key, **opts.role_kwargs())
        server = transport.Server(endpoints.endpoint(Dispatcher.TABLE, dispatcher), DISPATCHER_NAME,
                                  host=opts.host, port=opts.port, ns_conf=opts.ns_conf(), hmac_key=key,
                                  on_disconnect=dispatcher.connection_closed, limits=opts.limits())
        dispatcher.uri = server.uri
        names = [name.strip() for name in (opts.status_name or "").split(",") if name.strip()]
        page = None if opts.status_port is None else StatusPage(dispatcher.overview, opts.status_host, opts.status_port,
                                                                names)
        if page is not None:
            page.start()  # it logs where it is
    except (ClusterError, ValueError, OSError) as err:
        parser.exit(2, f"error: {err}\n")
    try:
        serving.serve_until_stopped(server, dispatcher.shutdown,
                                      on_ready=lambda: logger.info("gensim_distw2v.dispatcher ready at %s", server.uri))
    finally:
        if page is not None:
            page.stop()
    logger.info("gensim_distw2v.dispatcher stopped")
