"""The protocol layer: every message's record, the arrays inside them, the constants and limits.

No threads, no disk, no sockets. Every message from a peer goes through a record's ``from_wire``
(or a check of :mod:`~gensim_distw2v.protocol.arrays`) before use; those raise :class:`ValueError`
naming what is wrong, and never execute or import anything.

Modules, in the order they depend on each other:

* :mod:`~gensim_distw2v.protocol.constants`: dtypes, rules, modes, the trained and static arrays,
  size limits;
* :mod:`~gensim_distw2v.protocol.arrays`: arrays and merge deltas as plain data, their checks;
* :mod:`~gensim_distw2v.protocol.errors`: the error codes and their faults;
* :mod:`~gensim_distw2v.protocol.records`: :class:`Record`, the typed-record machinery;
* :mod:`~gensim_distw2v.protocol.calls`: call tables (:class:`~gensim_distw2v.protocol.calls.Table`);
* :mod:`~gensim_distw2v.protocol.nodes`, :mod:`~gensim_distw2v.protocol.checkpoints`,
  :mod:`~gensim_distw2v.protocol.session`, :mod:`~gensim_distw2v.protocol.counting`,
  :mod:`~gensim_distw2v.protocol.jobs`,
  :mod:`~gensim_distw2v.protocol.rounds`, :mod:`~gensim_distw2v.protocol.membership`,
  :mod:`~gensim_distw2v.protocol.status`: the messages, by topic;
* :mod:`~gensim_distw2v.protocol.tables`: every server's call table.

``from gensim_distw2v import protocol`` gives every name below as ``protocol.NAME``; each is loaded
from its module on first use, so this package imports nothing at import time (and no module of
the package depends on it in a cycle).
"""
import importlib

_WHERE = {
    # constants
    "ARRAY_DTYPES": "constants",
    "CHECKPOINT_STAGES": "constants",
    "DELTA_DTYPES": "constants",
    "MAX_ARRAY_BYTES": "constants",
    "MAX_JOB_WORDS": "constants",
    "MAX_PATH": "constants",
    "MERGE_RULES": "constants",
    "NODE_ROLES": "constants",
    "STATIC": "constants",
    "SYNC": "constants",
    "SYNC_MODES": "constants",
    "SyncMode": "constants",
    "WEIGHTS": "constants",
    "DISPATCHER_NAME": "constants",
    "GRANT_WAIT": "constants",
    "LONG_POLL": "constants",
    "MAX_URI": "constants",
    "MEMBER_ID": "constants",
    "SHARD_PREFIX": "constants",
    "WORKER_PREFIX": "constants",
    # arrays
    "MAX_SCALE": "arrays",
    "PoisonError": "arrays",
    "all_finite": "arrays",
    "check_damp_rows": "arrays",
    "check_token": "arrays",
    "owner_digest": "arrays",
    "shard_capability": "arrays",
    "check_turn": "arrays",
    "max_delta_for": "arrays",
    "weight_bound": "arrays",
    "need": "arrays",
    "pack_array": "arrays",
    "pack_deltas": "arrays",
    "pack_wanted": "arrays",
    "unpack_array": "arrays",
    "unpack_deltas": "arrays",
    "unpack_wanted": "arrays",
    "within": "arrays",
    # records
    "Record": "records",
    # nodes
    "NodeMetrics": "nodes",
    # checkpoints
    "CheckpointOrder": "checkpoints",
    "CheckpointSpec": "checkpoints",
    "CheckpointState": "checkpoints",
    "ShardCheckpointed": "checkpoints",
    "RestoreSpec": "checkpoints",
    "Resumed": "checkpoints",
    "ShardCheckpoint": "checkpoints",
    # session
    "CorpusFileSpec": "session",
    "MAX_READ_BYTES": "session",
    "MAX_STREAMS": "session",
    "RngState": "session",
    "SessionConfig": "session",
    "TrainParams": "session",
    "Close": "session",
    "Download": "session",
    "EpochCall": "session",
    "PutJobs": "session",
    "SessionRef": "session",
    "Upload": "session",
    # counting
    "CountChunk": "counting",
    "CountOpen": "counting",
    "CountPart": "counting",
    "CountRanges": "counting",
    "CountRef": "counting",
    "CountTake": "counting",
    "Counted": "counting",
    "corpus_digest": "counting",
    "range_token": "counting",
    # jobs
    "Job": "jobs",
    "JobBatch": "jobs",
    "RangeJob": "jobs",
    # rounds
    "MergePart": "rounds",
    "MergeReply": "rounds",
    "RoundReport": "rounds",
    "ShardDownload": "rounds",
    "ShardSpec": "rounds",
    # membership
    "Beat": "membership",
    "Hello": "membership",
    "Joined": "membership",
    "Opened": "membership",
    "ShardBeat": "membership",
    "BeginRound": "membership",
    "FileCheck": "membership",
    "GetJobs": "membership",
    "Heartbeat": "membership",
    "Join": "membership",
    "Leave": "membership",
    "QuitSession": "membership",
    "RoundDone": "membership",
    "check_member": "membership",
    # status
    "EpochCounts": "status",
    "Failure": "status",
    "HeldStatus": "status",
    "MemberStatus": "status",
    "Progress": "status",
    "SessionState": "status",
    "ShardMemberStatus": "status",
    "ShardStatus": "status",
    "Status": "status",
    "WorkerCounts": "status",
    "WorkerStatus": "status",
    "ProgressRequest": "status",
    "StatusRequest": "status",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
