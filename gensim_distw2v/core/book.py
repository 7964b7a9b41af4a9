"""What the dispatcher keeps of the nodes' metrics: a :class:`NodeBook` of the latest of every node,
with each one's recent words/s, and a session's :class:`History` of words, rate and loss over time,
at most a fixed number of points however long the run (the status page and TensorBoard draw from
them). No network.
"""
import collections
import dataclasses
import math
import time

RATE_WINDOW = 10.0  # seconds of a node's reports its words/s is taken over
HISTORY_POINTS = 600  # a session's history keeps at most this many points (thinned as it grows)


class NodeBook:
    """The dispatcher's view of every node: its latest metrics, when it was heard, its words/s.

    Parameters
    ----------
    window : float
        Seconds of reports a node's words/s is taken over.
    """

    def __init__(self, window=RATE_WINDOW):
        self.window = window
        self.latest = {}  # name -> NodeMetrics
        self.heard = {}  # name -> monotonic time of the latest report
        self.points = {}  # name -> deque of (monotonic time, session, words)

    def update(self, name, metrics, now=None):
        """Keep ``metrics`` (a :class:`gensim_distw2v.protocol.NodeMetrics`) as ``name``'s latest."""
        now = time.monotonic() if now is None else now
        points = self.points.setdefault(name, collections.deque())
        points.append((now, metrics.session, metrics.words))
        while len(points) > 2 and now - points[1][0] >= self.window:
            points.popleft()
        self.latest[name], self.heard[name] = metrics, now

    def forget(self, name):
        """``name`` left the cluster."""
        for book in (self.latest, self.heard, self.points):
            book.pop(name, None)

    def rate(self, name):
        """``name``'s words/s over its recent reports of one session (0 when it cannot tell)."""
        points = [p for p in self.points.get(name, ()) if p[1] == self.latest[name].session]
        if len(points) < 2 or points[-1][0] <= points[0][0]:
            return 0.0
        return max(0.0, (points[-1][2] - points[0][2]) / (points[-1][0] - points[0][0]))

    def view(self, name, now=None):
        """``name``'s latest metrics with ``silent`` and ``words_per_second`` filled in."""
        now = time.monotonic() if now is None else now
        return dataclasses.replace(self.latest[name], silent=max(0.0, now - self.heard[name]),
                                   words_per_second=self.rate(name))

    def of_session(self, sid, names, now=None):
        """``{name: metrics}`` of those of ``names`` whose latest report is of session ``sid``."""
        return {name: self.view(name, now) for name in names
                if name in self.latest and self.latest[name].session == sid}


class History:
    """A session's progress over time: words trained, their rate and the loss per word (both
    over the interval since the point before), at most
    ``max_points`` points (when full, every other point goes and points are taken half as
    often, so a day-long run keeps its whole shape).

    Parameters
    ----------
    every : float
        Seconds between points at first.
    max_points : int
        The most points kept.
    """

    def __init__(self, every=1.0, max_points=HISTORY_POINTS):
        if max_points < 4:
            raise ValueError("max_points must be >= 4")
        self.every, self.max_points = every, max_points
        self.points = []  # dicts {"t", "words", "words_per_second", "loss"}
        self._loss = None  # the summed loss at the last point

    def add(self, t, words, loss=None):
        """A point at ``t`` seconds since the session began (``words`` trained and the summed
        ``loss`` by then), if ``every`` seconds passed since the last one; returns whether it was kept."""
        if self.points and t - self.points[-1]["t"] < self.every:
            return False
        rate = per_word = None
        if self.points and t > self.points[-1]["t"]:
            before = self.points[-1]
            rate = max(0.0, (words - before["words"]) / (t - before["t"]))
            if loss is not None and self._loss is not None and math.isfinite(loss) and words > before["words"]:
                per_word = (loss - self._loss) / (words - before["words"])
        self._loss = loss if loss is not None and math.isfinite(loss) else None
        self.points.append({"t": float(t), "words": int(words), "words_per_second": rate or 0.0,
                            "loss": per_word})
        if len(self.points) > self.max_points:
            self.points = self.points[::2] if len(self.points) % 2 else self.points[1::2]
            self.every *= 2
        return True
