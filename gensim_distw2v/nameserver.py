"""A Pyro4 name server for the cluster, under the same pre-authentication limits as its daemons.

Usage::

    python -m gensim_distw2v.nameserver -n HOST -p PORT [--hmac-key-file FILE]

It is Pyro4's own name server (any Pyro4 client can use it; it speaks serpent only), with the
connection limits of :class:`gensim_distw2v.io.transport.Limits` and messages of at most 1 MB. Binding
anything but loopback needs the cluster's HMAC key, as for the dispatcher, shards and workers.
``python -m Pyro4.naming`` works too, without those limits.
"""
import logging
import sys

from gensim_distw2v import options
from gensim_distw2v.io import transport
from gensim_distw2v.io.keys import read_hmac_key
from gensim_distw2v.protocol.errors import ClusterError

logger = logging.getLogger("gensim_distw2v.nameserver")


def build_parser():
    """The command line's parser: :class:`gensim_distw2v.options.NameServerOptions`' options."""
    return options.parser(options.NameServerOptions, "python -m gensim_distw2v.nameserver", __doc__.split("\n")[0])


def main(argv=None):
    """Parse the command line and serve until Ctrl-C or SIGTERM."""
    opts = options.parse(build_parser(), options.NameServerOptions, argv)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=opts.log_level)
    try:
        key = read_hmac_key(opts.hmac_key_file)
        transport.serve_name_server(opts.host, opts.port, key, opts.limits())
    except (ClusterError, ValueError, OSError) as err:
        logger.error("%s", err)
        sys.exit(2)


if __name__ == "__main__":
    main()
