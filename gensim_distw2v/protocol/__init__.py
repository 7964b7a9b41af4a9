"""The protocol layer: every message's record, the arrays inside them, the constants and limits.

No threads, no disk, no sockets. Every message from a peer goes through a record's ``from_wire``
(or a check of :mod:`~gensim_distw2v.protocol.arrays`) before use; those raise :class:`ValueError`
naming what is wrong, and never execute or import anything.

Modules, in the order they depend on each other:

* :mod:`~gensim_distw2v.protocol.constants`: dtypes, the trained and static arrays, session states, names,
  size limits;
* :mod:`~gensim_distw2v.protocol.arrays`: arrays and merge deltas as plain data, their checks;
* :mod:`~gensim_distw2v.protocol.errors`: the error codes and their faults;
* :mod:`~gensim_distw2v.protocol.auth`: the secrets callers show, and their checks;
* :mod:`~gensim_distw2v.protocol.records`: :class:`Record`, the typed-record machinery;
* :mod:`~gensim_distw2v.protocol.calls`: call tables (:class:`~gensim_distw2v.protocol.calls.Table`);
* :mod:`~gensim_distw2v.protocol.nodes`, :mod:`~gensim_distw2v.protocol.checkpoints`,
  :mod:`~gensim_distw2v.protocol.session`, :mod:`~gensim_distw2v.protocol.counting`,
  :mod:`~gensim_distw2v.protocol.jobs`,
  :mod:`~gensim_distw2v.protocol.rounds`, :mod:`~gensim_distw2v.protocol.membership`,
  :mod:`~gensim_distw2v.protocol.status`: the messages, by topic;
* :mod:`~gensim_distw2v.protocol.tables`: every server's call table.

``from gensim_distw2v import protocol`` gives the names below as ``protocol.NAME``, each imported
here from its module (no module of the protocol imports this package back).
"""
from gensim_distw2v.protocol.constants import (ARRAY_DTYPES, CHECKPOINT_STAGES, DISPATCHER_NAME, GRANT_WAIT,
                                               LONG_POLL, MAX_JOB_WORDS, MAX_PATH, MAX_URI, MEMBER_ID, NODE_ROLES,
                                               SHARD_PREFIX, STATIC, WEIGHTS, WORKER_PREFIX)
from gensim_distw2v.protocol.arrays import (all_finite, check_damp_rows, check_turn, max_delta_for, MAX_SCALE, need,
                                            pack_array, pack_deltas, pack_wanted, unpack_array, unpack_deltas,
                                            unpack_wanted, weight_bound, within)
from gensim_distw2v.protocol.auth import check_token, owner_digest, range_token, shard_capability
from gensim_distw2v.protocol.records import Record
from gensim_distw2v.protocol.nodes import NodeMetrics
from gensim_distw2v.protocol.checkpoints import (CheckpointOrder, CheckpointSpec, CheckpointState, RestoreSpec,
                                                 Resumed, ShardCheckpoint, ShardCheckpointed)
from gensim_distw2v.protocol.session import (Close, CorpusFileSpec, Download, EpochCall, MAX_READ_BYTES, MAX_STREAMS,
                                             PutJobs, RngState, SessionConfig, SessionRef, TrainParams, Upload)
from gensim_distw2v.protocol.counting import (corpus_digest, CountChunk, Counted, CountOpen, CountPart, CountRanges,
                                              CountRef, CountTake)
from gensim_distw2v.protocol.jobs import (Job, JobBatch, RangeJob)
from gensim_distw2v.protocol.rounds import (MergePart, MergeReply, RoundReport, ShardDownload, ShardSpec)
from gensim_distw2v.protocol.membership import (Beat, BeginRound, check_member, FileCheck, GetJobs, Heartbeat, Hello,
                                                Join, Joined, Leave, Opened, QuitSession, RoundDone, ShardBeat)
from gensim_distw2v.protocol.status import (EpochCounts, Failure, HeldStatus, MemberStatus, Progress, ProgressRequest,
                                            SessionState, ShardMemberStatus, ShardStatus, Status, StatusRequest,
                                            WorkerCounts, WorkerStatus)

__all__ = ["ARRAY_DTYPES", "Beat", "BeginRound", "CHECKPOINT_STAGES", "CheckpointOrder", "CheckpointSpec",
           "CheckpointState", "Close", "CorpusFileSpec", "CountChunk", "CountOpen", "CountPart", "CountRanges",
           "CountRef", "CountTake", "Counted", "DISPATCHER_NAME", "Download", "EpochCall", "EpochCounts", "Failure",
           "FileCheck", "GRANT_WAIT", "GetJobs", "Heartbeat", "HeldStatus", "Hello", "Job", "JobBatch", "Join",
           "Joined", "LONG_POLL", "Leave", "MAX_JOB_WORDS", "MAX_PATH", "MAX_READ_BYTES", "MAX_SCALE", "MAX_STREAMS",
           "MAX_URI", "MEMBER_ID", "MemberStatus", "MergePart", "MergeReply", "NODE_ROLES", "NodeMetrics", "Opened",
           "Progress", "ProgressRequest", "PutJobs", "QuitSession", "RangeJob", "Record",
           "RestoreSpec", "Resumed", "RngState", "RoundDone", "RoundReport", "SHARD_PREFIX", "STATIC",
           "SessionConfig", "SessionRef", "SessionState", "ShardBeat", "ShardCheckpoint", "ShardCheckpointed",
           "ShardDownload", "ShardMemberStatus", "ShardSpec", "ShardStatus", "Status", "StatusRequest", "TrainParams",
           "Upload", "WEIGHTS", "WORKER_PREFIX", "WorkerCounts", "WorkerStatus", "all_finite", "check_damp_rows",
           "check_member", "check_token", "check_turn", "corpus_digest", "max_delta_for", "need", "owner_digest",
           "pack_array", "pack_deltas", "pack_wanted", "range_token", "shard_capability", "unpack_array",
           "unpack_deltas", "unpack_wanted", "weight_bound", "within"]
