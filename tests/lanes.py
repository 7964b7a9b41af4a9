"""The test lanes and their clock (used by conftest.py): which lane a test is in, how long each took."""

LANES = ("unit", "cluster", "system")  # in the order they run
# seconds the unit lane may take, all of it (README.rst's promise of the quick lane): about 80 s on this
# machine at its speed of 2026-12-02, which varies up to twofold from day to day
UNIT_BUDGET = 180.0


def lane_of(item):
    """The lane of a collected test (conftest.py has checked it has exactly one)."""
    return next(mark.name for mark in item.iter_markers() if mark.name in LANES)


class LaneClock:
    """Each lane's wall time (first test's start to last test's end) and each of its tests' own time.

    Parameters
    ----------
    lanes : dict
        ``{nodeid: lane}`` of the collected tests.
    """

    def __init__(self, lanes):
        self.lanes = lanes
        self.start, self.end = {}, {}
        self.durations = {lane: {} for lane in LANES}

    def ran(self, nodeid, start, end):
        """Test ``nodeid`` ran (set-up to tear-down) from ``start`` to ``end`` (monotonic seconds)."""
        lane = self.lanes.get(nodeid)
        if lane not in self.durations:
            return
        self.start.setdefault(lane, start)
        self.end[lane] = end
        self.durations[lane][nodeid] = end - start

    def wall(self, lane):
        """Seconds from the lane's first test's start to its last one's end (None: none ran)."""
        return self.end[lane] - self.start[lane] if lane in self.start else None

    def summary(self):
        """``{lane: {"tests", "wall_s", "sum_s"}}`` of the lanes that ran."""
        return {lane: {"tests": len(self.durations[lane]), "wall_s": round(self.wall(lane), 1),
                       "sum_s": round(sum(self.durations[lane].values()), 1)}
                for lane in LANES if self.wall(lane) is not None}

    def over_budget(self, budget=None):
        """The unit lane's message if it took over ``budget`` (default :data:`UNIT_BUDGET`) seconds, else None."""
        budget = UNIT_BUDGET if budget is None else budget
        wall = self.wall("unit")
        if wall is None or wall <= budget:
            return None
        slowest = sorted(self.durations["unit"].items(), key=lambda kv: -kv[1])[:5]
        return (f"the unit lane took {wall:.1f} s, over its {budget:g} s (tests/lanes.py UNIT_BUDGET, "
                f"README.rst's quick lane); its slowest: " + ", ".join(f"{n} {t:.1f} s" for n, t in slowest)
                + ". Make them faster, or move what starts processes or waits to the cluster lane")
