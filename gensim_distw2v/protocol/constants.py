"""The protocol's constants, each defined once: what travels, in which types, within which limits.

No imports of this package: every other module may import this one. The values settings choose among
(merge rules, delta dtypes, sync modes) and the array limit are :mod:`gensim_distw2v.config.choices`'.
"""
# dtypes allowed on the wire (anything else is refused before numpy sees it)
ARRAY_DTYPES = {"float32", "float16", "int8", "uint32", "uint8", "int64"}
WEIGHTS = ("syn0", "syn1neg", "syn1")  # the trained matrices (held and merged by the shards)
STATIC = {"lockf": "float32", "cum_table": "uint32", "sample_int": "uint32", "points": "uint32",
          "codes": "uint8", "code_offsets": "int64", "vocab_bytes": "uint8", "vocab_offsets": "int64"}
MAX_JOB_WORDS = 1_000_000  # a job is about batch_words (10,000) words; refuse absurd ones


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
