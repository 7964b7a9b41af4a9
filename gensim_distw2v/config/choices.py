"""The values settings choose among, each defined once, and the limits that bound them.

No imports of this package: the protocol's records and every role read these, and
:class:`~gensim_distw2v.config.settings.Settings` checks a setting against them.
"""
import dataclasses

DELTA_DTYPES = ("float32", "float16", "int8")  # merge deltas' values (int8 with a float32 scale per row)
MERGE_RULES = ("sum", "damp", "mean")
# which rare syn1neg rows a round that merges the rare rows brings down (settings.Settings.cold_output_down): every
# one a worker lacks in every such round, only in those that also send syn1neg's rare rows up, or those of its jobs
COLD_OUTPUT_DOWN = ("all", "with_up", "held")
# how a corpus_file run's learning rate decays (settings.Settings.corpus_file_rate)
CORPUS_FILE_RATES = ("linear", "gensim")
MAX_ARRAY_BYTES = 128 * 1024 * 1024  # one message's array (arrays move in chunks below this)


@dataclasses.dataclass(frozen=True)
class SyncMode:
    """How one sync mode orders a worker's merge rounds: every decision that differs between the modes.

    Parameters
    ----------
    name : str
        The setting's value (``settings.Settings.sync``).
    in_turn : bool
        Rounds taken in turn (by epoch, round, worker rank) and jobs dealt to ranks in a fixed way, each
        round taken in before its worker trains on: nothing depends on timing, so a run is reproducible.
    bounded : bool
        A worker trains at most one interval ahead of its last round: the round's latency limits it.
    within_epoch : bool
        Merge rounds within an epoch (else only the epoch ends merge).
    """

    name: str
    in_turn: bool
    bounded: bool
    within_epoch: bool

    @property
    def overlapped(self):
        """Rounds within an epoch that go while training goes on (a worker's lag steers its interval, an idle
        worker sends what it trained, rounds may be in flight together)."""
        return self.within_epoch and not self.in_turn


# how workers' merge rounds are ordered (settings.Settings.sync): ssp bounded staleness, bsp a barrier per
# round, asp no bound, local merges at epoch ends only. A mode is added here, and nowhere else decides by name.
SYNC = {mode.name: mode for mode in (SyncMode("ssp", in_turn=False, bounded=True, within_epoch=True),
                                     SyncMode("bsp", in_turn=True, bounded=True, within_epoch=True),
                                     SyncMode("asp", in_turn=False, bounded=False, within_epoch=True),
                                     SyncMode("local", in_turn=False, bounded=False, within_epoch=False))}
SYNC_MODES = tuple(SYNC)
