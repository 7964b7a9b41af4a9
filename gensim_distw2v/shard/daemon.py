"""``python -m gensim_distw2v.shard``: the shard's command line (options, start, serve until stopped)."""
import logging

from gensim_distw2v import options
from gensim_distw2v.io import channel, endpoints, serving, transport
from gensim_distw2v.io.keys import read_hmac_key
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.shard import service
from gensim_distw2v.shard.service import Shard, cap_malloc_arenas

logger = logging.getLogger("gensim_distw2v.shard")


def build_parser():
    """The command line's parser: :class:`gensim_distw2v.options.ShardOptions`' options."""
    return options.parser(options.ShardOptions, "python -m gensim_distw2v.shard", service.__doc__.split("\n\n")[0])


def main(argv=None):
    """``python -m gensim_distw2v.shard``: serve until killed."""
    parser = build_parser()
    opts = options.parse(parser, options.ShardOptions, argv)
    cap_malloc_arenas()  # before any thread starts
    logging.basicConfig(format="%(asctime)s : %(processName)s : %(levelname)s : %(message)s", level=opts.log_level)
    bulk = None
    try:
        key = read_hmac_key(opts.hmac_key_file)
        shard = Shard(opts.ns_conf(), hmac_key=key, **opts.role_kwargs())
        served = endpoints.endpoint(Shard.TABLE, shard)
        if opts.channel_port >= 0 and channel.available() and not transport.uses_tls():  # merges as raw buffers
            bulk = channel.ChannelServer(served.call, Shard.TABLE.ops(bulk=True), host=opts.host, port=opts.channel_port, hmac_key=key,
                                         limits=opts.limits())
            shard.channel_port = bulk.address[1]
        elif opts.channel_port >= 0:
            logger.warning("no bulk channel (%s): merges go by Pyro4", "Pyro4 speaks TLS here, the channel does not"
                           if transport.uses_tls() else "the 'cryptography' package is missing")
        server = transport.Server(served, shard.name, host=opts.host, port=opts.port, ns_conf=opts.ns_conf(),
                                  hmac_key=key, limits=opts.limits())
    except (ClusterError, ValueError, OSError) as err:
        if bulk is not None:
            bulk.close()
        parser.exit(2, f"error: {err}\n")
    shard.uri = server.uri
    try:
        serving.serve_member(server, shard, "gensim_distw2v.shard %s ready at %s (merges: %s)", shard.name, server.uri,
                             f"channel port {shard.channel_port}" if bulk is not None else "Pyro4")
    finally:
        if bulk is not None:
            bulk.close()
    logger.info("gensim_distw2v.shard %s stopped", shard.name)
