"""The cluster's HMAC key: where a process finds it, and the rule that binding beyond loopback needs one."""
import os

from gensim_distw2v.protocol.errors import ClusterError

__all__ = ["HMAC_ENV", "LOOPBACK", "as_key", "check_bind", "read_hmac_key"]


HMAC_ENV = "GENSIM_DISTW2V_HMAC_KEY"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def read_hmac_key(path=None):
    """The HMAC key from ``path`` (a file) or the environment variable ``GENSIM_DISTW2V_HMAC_KEY``.

    Returns
    -------
    bytes or None
    """
    if path:
        with open(path, "rb") as fin:
            key = fin.read().strip()
        if not key:
            raise ValueError(f"the HMAC key file {path!r} is empty")
        return key
    key = os.environ.get(HMAC_ENV)
    return key.encode("utf8") if key else None


def as_key(key):
    """Normalise an HMAC key given as str or bytes (or None)."""
    if key is None or isinstance(key, bytes):
        return key or None
    return str(key).encode("utf8") or None


def check_bind(host, hmac_key):
    """Refuse to bind a non-loopback address without an HMAC key."""
    if host not in LOOPBACK and not hmac_key:
        raise ClusterError(
            f"refusing to listen on {host} without an HMAC key: anyone who can reach the port could drive "
            f"the cluster. Pass --hmac-key-file FILE (the same key on every node and for the name server: "
            f"PYRO_HMAC_KEY) or set {HMAC_ENV}.")
