"""A Pyro4 name server for the cluster, under the same pre-authentication limits as its daemons.

Usage::

    python -m gensim_distw2v.nameserver -n HOST -p PORT [--hmac-key-file FILE]

It is Pyro4's own name server (any Pyro4 client can use it; it speaks serpent only), with the
connection limits of :class:`gensim_distw2v.io.transport.Limits` and messages of at most 1 MB. Binding
anything but loopback needs the cluster's HMAC key, as for the dispatcher, shards and workers.
``python -m Pyro4.naming`` works too, without those limits.
"""
import argparse
import logging
import sys

from gensim_distw2v.io import transport

logger = logging.getLogger("gensim_distw2v.nameserver")


def main(argv=None):
    """Parse the command line and serve until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v.nameserver", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("-n", "--host", default="127.0.0.1", help="address to bind (others than loopback need a key)")
    parser.add_argument("-p", "--port", type=int, default=transport.DEFAULT_NS_PORT, help="port to bind")
    parser.add_argument("--hmac-key-file", help=f"file holding the cluster's HMAC key (or set {transport.HMAC_ENV})")
    parser.add_argument("--log-level", default="INFO", help="logging level")
    transport.add_limit_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=args.log_level.upper())
    try:
        key = transport.read_hmac_key(args.hmac_key_file)
        transport.serve_name_server(args.host, args.port, key, transport.limits_from_args(args))
    except (transport.ClusterError, ValueError, OSError) as err:
        logger.error("%s", err)
        sys.exit(2)


if __name__ == "__main__":
    main()
