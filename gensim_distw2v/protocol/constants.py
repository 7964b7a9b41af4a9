"""The protocol's constants, each defined once: what travels, in which types, within which limits.

No imports of this package: every other module may import this one.
"""
import dataclasses

# dtypes allowed on the wire (anything else is refused before numpy sees it)
ARRAY_DTYPES = {"float32", "float16", "int8", "uint32", "uint8", "int64"}
DELTA_DTYPES = ("float32", "float16", "int8")  # merge deltas' values (int8 with a float32 scale per row)
MERGE_RULES = ("sum", "damp", "mean")
# which rare syn1neg rows a round that merges the rare rows brings down (settings.Settings.cold_output_down): every
# one a worker lacks in every such round, only in those that also send syn1neg's rare rows up, or those of its jobs
COLD_OUTPUT_DOWN = ("all", "with_up", "held")
# how a corpus_file run's learning rate decays (settings.Settings.corpus_file_rate)
CORPUS_FILE_RATES = ("linear", "gensim")
WEIGHTS = ("syn0", "syn1neg", "syn1")  # the trained matrices (held and merged by the shards)
STATIC = {"lockf": "float32", "cum_table": "uint32", "sample_int": "uint32", "points": "uint32",
          "codes": "uint8", "code_offsets": "int64", "vocab_bytes": "uint8", "vocab_offsets": "int64"}
MAX_JOB_WORDS = 1_000_000  # a job is about batch_words (10,000) words; refuse absurd ones
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


# ---------------------------------------------------------------------------------------------- sessions
# a session's states (core.session.Session.state; status records carry them as these strings), and what
# moves it: (state, event) -> the state next; a pair not here is refused
UPLOADING, RUNNING, FAILED, CLOSED = "uploading", "running", "failed", "closed"
SESSION_STATES = (UPLOADING, RUNNING, FAILED, CLOSED)
LIVE_STATES = (UPLOADING, RUNNING, FAILED)  # a session in these holds the cluster (a failed one until it is told)
SESSION_EVENTS = {(UPLOADING, "start"): RUNNING, (UPLOADING, "fail"): FAILED, (RUNNING, "fail"): FAILED,
                  (UPLOADING, "close"): CLOSED, (RUNNING, "close"): CLOSED, (FAILED, "close"): CLOSED}


# ---------------------------------------------------------------------------------------------- checkpoints
MAX_PATH = 4096
CHECKPOINT_STAGES = ("taken", "written", "failed")


# --------------------------------------------------------------------------------------------- metrics
NODE_ROLES = ("worker", "shard", "dispatcher")


# --------------------------------------------------------------------------------------------- membership
DISPATCHER_NAME = "gensim_distw2v.dispatcher"  # names in the name server
WORKER_PREFIX = "gensim_distw2v.worker."
SHARD_PREFIX = "gensim_distw2v.shard."
MEMBER_ID = r"[A-Za-z0-9_.-]{1,64}"  # what follows a worker's or shard's prefix
MAX_URI = 512
GRANT_WAIT = 10.0  # seconds a shard's session or a worker's count waits to hear from the dispatcher that it is granted
LONG_POLL = 5.0  # seconds a heartbeat may wait at the dispatcher for a change (its long poll), at most
