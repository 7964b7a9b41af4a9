"""Every server's call table (see :mod:`gensim_distw2v.protocol.calls`): the dispatcher's, a
shard's and a worker's remote calls, each with its request record, handler and reply.

docs/design.rst's call tables are generated from these (a test checks they agree).
"""
from gensim_distw2v.protocol.calls import Call, Table
from gensim_distw2v.protocol.checkpoints import ShardCheckpointed
from gensim_distw2v.protocol.counting import CountChunk, Counted, CountOpen, CountPart, CountRanges, CountRef, CountTake
from gensim_distw2v.protocol.jobs import JobBatch
from gensim_distw2v.protocol.membership import (Beat, BeginRound, FileCheck, GetJobs, Heartbeat, Hello, Join, Joined,
                                                Leave, Opened, QuitSession, RoundDone, ShardBeat)
from gensim_distw2v.protocol.session import Close, Download, EpochCall, PutJobs, SessionConfig, SessionRef, Upload
from gensim_distw2v.protocol.rounds import MergePart, MergeReply, ShardDownload, ShardSpec
from gensim_distw2v.protocol.status import Progress, ProgressRequest, ShardStatus, Status, StatusRequest, WorkerStatus

__all__ = ["DISPATCHER", "SHARD", "WORKER", "TABLES", "rst", "update_doc"]

# ---------------------------------------------------------------------------------------------- dispatcher
_C, _W, _S = "clients.", "workers.", "shards."  # the dispatcher's parts: client-, worker- and shard-facing
DISPATCHER = Table("dispatcher", [
    # the client's calls (gensim_distw2v.dispatcher.clients)
    Call("status", StatusRequest, _C + "status", Status, "the workers and shards registered, the session",
         auth="none", cadence="second"),
    Call("open_session", SessionConfig, _C + "open_session", Opened, "open a session (or resume one)",
         auth="none", cadence="session"),
    Call("upload", Upload, _C + "upload", None, "rows of a static array, in order", auth="owner", cadence="session"),
    Call("start", SessionRef, _C + "start", int, "check the arrays, start the session: workers registered",
         auth="owner", cadence="session"),
    Call("put_jobs", PutJobs, _C + "put_jobs", int, "queue jobs (all or none: how many)",
         auth="owner", cadence="word"),
    Call("end_epoch", EpochCall, _C + "end_epoch", None, "every job of the epoch is put",
         auth="owner", cadence="epoch"),
    Call("open_file_epoch", EpochCall, _C + "open_file_epoch", int, "hand out an epoch's byte ranges: how many",
         auth="owner", cadence="epoch"),
    Call("progress", ProgressRequest, _C + "progress", Progress,
         "the session's progress, state and failure (a long poll for an epoch's end)",
         auth="watcher", cadence="second"),
    Call("checkpoint", SessionRef, _C + "checkpoint", int, "checkpoint now: its number",
         auth="owner", cadence="rare"),
    Call("download", Download, _C + "download", dict, "rows of a static array (an array message)",
         auth="token", cadence="session"),
    Call("close", Close, _C + "close", None, "end the session", auth="owner", cadence="session"),
    # a vocabulary count's lease (gensim_distw2v.dispatcher.counts)
    Call("open_count", CountRef, "counts.open", None,
         "lease the cluster's count: the shards may open it, for its client only", auth="count", cadence="count"),
    Call("count_alive", CountRef, "counts.alive", None, "the count's client is alive", auth="count", cadence="count"),
    Call("close_count", CountRef, "counts.close", None, "give the count's lease back", auth="count", cadence="count"),
    # a worker's calls (gensim_distw2v.dispatcher.workers)
    Call("hello", Hello, _W + "hello", str, "a worker registers: its secret (its later calls carry it)",
         auth="none", cadence="session"),
    Call("heartbeat", Heartbeat, _W + "heartbeat", Beat, "a worker is alive: the session to be in (long poll)",
         auth="member", cadence="second"),
    Call("leave", Leave, _W + "leave", None, "a worker shuts down", auth="member", cadence="rare"),
    Call("join", Join, _W + "join", Joined, "join the running session: config, rank, shards",
         auth="member", cadence="session"),
    Call("get_jobs", GetJobs, _W + "get_jobs", JobBatch, "jobs to train (waits while there are none)",
         auth="member", cadence="word"),
    Call("begin_round", BeginRound, _W + "begin_round", bool, "may this merge round go now (sync='bsp')",
         auth="member", cadence="word"),
    Call("round_done", RoundDone, _W + "round_done", None, "a merge round is folded: its jobs are trained",
         auth="member", cadence="second"),
    Call("file_check", FileCheck, _W + "file_check", None, "whether the worker sees the client's corpus file",
         auth="member", cadence="session"),
    Call("quit_session", QuitSession, _W + "quit_session", None, "the session failed on the worker",
         auth="member", cadence="rare"),
    # a shard's calls (gensim_distw2v.dispatcher.shards)
    Call("shard_hello", Hello, _S + "hello", str, "a shard registers: its secret (its later calls carry it)",
         auth="none", cadence="session"),
    Call("shard_beat", Heartbeat, _S + "heartbeat", ShardBeat,
         "a shard is alive: its session, the session's ranks, checkpoint orders (long poll)",
         auth="member", cadence="second"),
    Call("shard_leave", Leave, _S + "leave", None, "a shard shuts down", auth="member", cadence="rare"),
    Call("shard_checkpoint", ShardCheckpointed, _S + "checkpointed", None, "a shard's report on a checkpoint order",
         auth="member", cadence="rare"),
])

# ---------------------------------------------------------------------------------------------- shard
SHARD = Table("shard", [
    # the client's calls (gensim_distw2v.client.session)
    Call("status", StatusRequest, "status", ShardStatus, "the session the shard holds, its counters, its metrics",
         auth="none", cadence="session"),
    Call("open_session", ShardSpec, "open_session", None, "hold a session's rows (uploaded, or read from a checkpoint)",
         auth="grant", cadence="session"),
    Call("upload", Upload, "upload", None, "rows of a trained matrix, in order",
         auth="capability", cadence="session"),
    Call("start", SessionRef, "start", None, "every row is in: merges may begin",
         auth="capability", cadence="session"),
    Call("close", Close, "close", None, "drop the session", auth="capability", cadence="session"),
    # the client's and the workers' calls
    Call("download", ShardDownload, "download", dict,
         "rows of a trained matrix (an array message); a worker's first takes it a slot",
         auth="token", cadence="session"),
    # a worker's calls (gensim_distw2v.worker.merger)
    Call("channel", StatusRequest, "channel", int,
         "the port of the shard's bulk channel, which carries merges (0: none, merges go by Pyro4)",
         auth="none", cadence="session"),
    Call("merge", MergePart, "merge", MergeReply, "fold a worker's merge part, answer what it lacks",
         auth="token", cadence="word", bulk=True),
    # a vocabulary count's calls (gensim_distw2v.shard.counts): the client's, and count_add the workers'
    Call("count_open", CountOpen, "counts.open", None, "hold a part of a count's words",
         auth="count_grant", cadence="count"),
    Call("count_add", CountPart, "counts.add", bool, "add a range's words of this part (each range once)",
         auth="range", cadence="count", bulk=True),
    Call("count_take", CountTake, "counts.take", CountChunk, "words of this part, merged, in first-occurrence order",
         auth="count", cadence="count"),
    Call("count_close", CountRef, "counts.close", None, "drop a count", auth="count", cadence="count"),
])

# ---------------------------------------------------------------------------------------------- worker
WORKER = Table("worker", [
    Call("status", StatusRequest, "status", WorkerStatus, "what the worker is doing", auth="none", cadence="rare"),
    Call("count", CountRanges, "counting.count", Counted,
         "count byte ranges of a corpus, send each range's words to the shards", auth="lease", cadence="count"),
])

TABLES = (DISPATCHER, SHARD, WORKER)  # every server's table


# ---------------------------------------------------------------------------------------------- the docs
BEGIN, END = ".. calls of the {server} (generated from gensim_distw2v.protocol.tables)", ".. end of the calls"


def _name(kind):
    """A request's or reply's type as the table shows it (records: their module under protocol)."""
    if kind is None:
        return "nothing"
    module = kind.__module__.rpartition(".")[2]
    return f"``{module}.{kind.__name__}``" if kind.__module__.startswith("gensim_distw2v.protocol.") else \
        f"``{kind.__name__}``"


def rst(table):
    """``table`` as the reStructuredText that docs/design.rst shows (between :data:`BEGIN` and :data:`END`)."""
    rows = [("call", "request", "reply", "handler", "who", "how often", "what it does")]
    rows += [(f"``{c.op}``", _name(c.request), _name(c.reply), f"``{c.handler}``", c.auth,
              c.cadence + (", bulk" if c.bulk else ""), c.doc) for c in table]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * w for w in widths)

    def line(row):
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
    return "\n".join([BEGIN.format(server=table.server), "", rule, line(rows[0]), rule]
                     + [line(row) for row in rows[1:]] + [rule, "", END])


def update_doc(text):
    """``text`` (docs/design.rst) with each table's section (from :data:`BEGIN` to :data:`END`)
    generated anew; a table without a section is refused (place its two marker lines first)."""
    for table in TABLES:
        begin = BEGIN.format(server=table.server)
        start = text.find(begin)
        if start < 0:
            raise ValueError(f"no section for the {table.server}'s calls: put the lines {begin!r} and {END!r} "
                             f"where the table goes")
        stop = text.index(END, start) + len(END)
        text = text[:start] + rst(table) + text[stop:]
    return text


if __name__ == "__main__":  # python -m gensim_distw2v.protocol.tables docs/design.rst: rewrite its call tables
    import sys

    with open(sys.argv[1], encoding="utf-8") as fin:
        old = fin.read()
    new = update_doc(old)
    if new != old:
        with open(sys.argv[1], "w", encoding="utf-8") as fout:
            fout.write(new)
    print(f"{sys.argv[1]}: {'updated' if new != old else 'up to date'}")
