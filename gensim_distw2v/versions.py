"""The versions every process of a cluster must share (a leaf: it imports nothing of the package).

The dispatcher refuses a worker or shard whose versions differ from its own, naming both sides.
"""
import importlib.metadata

__version__ = "0.2.0"


def versions():
    """The versions that must agree across a cluster."""
    return {"gensim": importlib.metadata.version("gensim"), "gensim_distw2v": __version__}


def check_versions(theirs, who):
    """Raise ValueError naming both sides when ``theirs`` differs from ours."""
    ours = versions()
    if not isinstance(theirs, dict) or any(theirs.get(k) != v for k, v in ours.items()):
        raise ValueError(
            f"version mismatch: {who} runs gensim {theirs.get('gensim') if isinstance(theirs, dict) else '?'} / "
            f"gensim_distw2v {theirs.get('gensim_distw2v') if isinstance(theirs, dict) else '?'}, the dispatcher "
            f"runs gensim {ours['gensim']} / gensim_distw2v {ours['gensim_distw2v']}; install the same versions "
            f"on every node")
