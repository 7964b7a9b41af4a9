"""Where a process finds the cluster: the name server in a gensim-style ``ns_conf``, and the cluster's HMAC
key (and the rule that binding beyond loopback needs one)."""
import logging
import os
import stat
import threading

from gensim_distw2v.protocol.errors import ClusterError

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_NS_PORT", "HMAC_ENV", "LOOPBACK", "as_key", "check_bind", "ns_settings", "read_hmac_key"]


HMAC_ENV = "GENSIM_DISTW2V_HMAC_KEY"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_NS_PORT = 9090


def read_hmac_key(path=None):
    """The HMAC key from ``path`` (a file) or the environment variable ``GENSIM_DISTW2V_HMAC_KEY``.

    Returns
    -------
    bytes or None
    """
    if path:
        with open(path, "rb") as fin:
            mode = os.fstat(fin.fileno()).st_mode
            key = fin.read().strip()
        if not key:
            raise ValueError(f"the HMAC key file {path!r} is empty")
        if mode & 0o077:  # other users of the node can read (or change) the cluster's key
            logger.warning("the HMAC key file %s is open to other users (mode %s): anyone who reads it can drive the "
                           "cluster; chmod 600 %s", path, stat.filemode(mode), path)
        return key
    key = os.environ.get(HMAC_ENV)
    return key.encode("utf8") if key else None


def as_key(key):
    """Normalise an HMAC key given as str or bytes (or None)."""
    if key is None or isinstance(key, bytes):
        return key or None
    return str(key).encode("utf8") or None


_UNKEYED_WARNED = threading.Event()  # (once a process: a shard binds its daemon and its channel)


def check_bind(host, hmac_key):
    """Refuse to bind a non-loopback address without an HMAC key; on loopback, warn (once a
    process) that every user of the machine can reach it."""
    if host in LOOPBACK and not hmac_key and not _UNKEYED_WARNED.is_set():
        _UNKEYED_WARNED.set()
        logger.warning("listening on %s without an HMAC key: every user of this machine can drive the cluster "
                       "through it; on a shared machine pass --hmac-key-file FILE (mode 600) or set %s", host,
                       HMAC_ENV)
    if host not in LOOPBACK and not hmac_key:
        raise ClusterError(
            f"refusing to listen on {host} without an HMAC key: anyone who can reach the port could drive "
            f"the cluster. Pass --hmac-key-file FILE (the same key on every node and for the name server: "
            f"PYRO_HMAC_KEY) or set {HMAC_ENV}.")


def ns_settings(ns_conf):
    """``(host, port, broadcast, hmac_key)`` from a gensim-style ``ns_conf`` dict."""
    ns_conf = dict(ns_conf or {})
    unknown = set(ns_conf) - {"host", "port", "broadcast", "hmac_key"}
    if unknown:
        raise ValueError(f"unknown ns_conf keys {sorted(unknown)}; known: host, port, broadcast, hmac_key")
    return (ns_conf.get("host") or "127.0.0.1", int(ns_conf.get("port") or DEFAULT_NS_PORT),
            bool(ns_conf.get("broadcast", False)), as_key(ns_conf.get("hmac_key")))
