"""How the rows of the trained matrices are spread over the parameter shards.

Shard ``p`` of ``P`` owns the global rows ``p, p + P, p + 2P, ...``; its own row ``j`` is global row
``j * P + p``. Rows are in decreasing order of word frequency (gensim sorts its vocabulary), so
interleaving gives every shard an equal share of the frequent words, which carry most of the merge
traffic, and keeps each shard's rows in order of frequency too: the first rows of a shard are its
share of the first rows of the model (the damped rows, the hot rows), as :mod:`gensim_distw2v.core.merge`
expects. With one shard the layout is the identity and costs nothing.
"""
import numpy as np

__all__ = ["ShardLayout"]


class ShardLayout:
    """Rows of ``n_rows``-row matrices spread over ``n_shards`` shards, interleaved.

    Parameters
    ----------
    n_shards : int
        Number of shards (at least 1).
    """

    def __init__(self, n_shards):
        if isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1:
            raise ValueError(f"n_shards must be an int >= 1, got {n_shards!r}")
        self.n_shards = int(n_shards)

    def __repr__(self):
        return f"ShardLayout({self.n_shards})"

    def count(self, n_rows, shard):
        """How many of the first ``n_rows`` global rows shard ``shard`` owns (also: the shard's own row
        where global row ``n_rows`` would go, so ``[count(lo), count(hi))`` is its part of ``[lo, hi)``)."""
        return max(0, -(-(int(n_rows) - shard) // self.n_shards))

    def local_range(self, lo, hi, shard):
        """The shard's own rows of the global rows ``[lo, hi)``."""
        return self.count(lo, shard), self.count(hi, shard)

    def rows_of(self, matrix, shard):
        """The shard's rows of a global matrix, as a view (copy it to send it)."""
        return matrix[shard::self.n_shards]

    def split(self, rows, *columns):
        """Split increasing global ``rows`` (with arrays indexed alike: values, scales or None) by shard.

        Returns
        -------
        list
            Per shard, ``(its own rows, *columns)``; rows stay increasing. With one shard, the inputs.
        """
        if self.n_shards == 1:
            return [(rows,) + columns]
        rows = np.asarray(rows)
        # owners as the smallest integers that hold them: numpy's stable sort of those is a radix sort
        owner = (rows % self.n_shards).astype(np.uint8 if self.n_shards <= 256 else np.uint16
                                              if self.n_shards <= 65536 else np.int64)
        # one stable sort by owner, then a slice per shard (rows stay increasing within each)
        order = np.argsort(owner, kind="stable")
        ends = np.cumsum(np.bincount(owner, minlength=self.n_shards)).tolist()
        local = (rows[order] // self.n_shards).astype(np.uint32)
        columns = tuple(None if c is None else np.take(c, order, axis=0) for c in columns)
        out, start = [], 0
        for end in ends:
            out.append((local[start:end],) + tuple(None if c is None else c[start:end] for c in columns))
            start = end
        return out

    def to_global(self, rows, shard):
        """A shard's own rows as global rows (uint32)."""
        if self.n_shards == 1:
            return rows
        rows = np.asarray(rows, dtype=np.uint32)  # (global rows fit uint32: the vocabulary's limit)
        return rows * np.uint32(self.n_shards) + np.uint32(shard)
