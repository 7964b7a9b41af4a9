"""Call tables: requests checked on arrival, replies checked on return, faults carried as plain data
(code, class and message), the dispatcher driven in-process through its table, and the design
document's call tables as the tables are."""
import copy
import dataclasses
import importlib
import inspect
import os
import pkgutil
import threading
import types
import typing

import msgpack
import numpy as np
import pytest
import Pyro4.util

import gensim_distw2v
from gensim_distw2v import protocol
from gensim_distw2v.dispatcher import Dispatcher
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.protocol import calls, errors, tables
from gensim_distw2v.protocol.records import Record
from gensim_distw2v.config.settings import Settings
from gensim_distw2v.versions import versions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER, SHARD = protocol.WORKER_PREFIX + "w1", protocol.SHARD_PREFIX + "s1"


@dataclasses.dataclass
class Ping(Record):
    WHAT: typing.ClassVar[str] = "ping"
    n: int
    fault: typing.Optional[str] = None


@dataclasses.dataclass
class Pong(Record):
    WHAT: typing.ClassVar[str] = "pong"
    n: int


TOY = calls.Table("toy", [calls.Call("ping", Ping, "on_ping", Pong, "n + 1"),
                          calls.Call("count", Ping, "on_count", int, "n"),
                          calls.Call("fail", Ping, "on_fail", None, "raise what it is told")])


class Toy:
    def on_ping(self, request):
        return Pong(n=request.n + 1)

    def on_count(self, request):
        return request.n if request.n >= 0 else "not an int"

    def on_fail(self, request):
        if request.fault is None:
            raise ValueError("a plain refusal")
        raise errors.fault(request.fault, f"refused as {request.fault}")


def _toy_caller():
    return calls.Caller(TOY, calls.Handlers(TOY, Toy()).handle)


@pytest.mark.unit
def test_a_table_checks_requests_on_arrival_and_replies_on_return():
    toy = _toy_caller()
    assert toy.call("ping", Ping(n=1)) == Pong(n=2) and toy.call("ping", n=5) == Pong(n=6)
    assert toy.call("count", n=3) == 3
    with pytest.raises(ValueError, match="malformed count reply: expected int, got str"):
        toy.call("count", n=-1)
    with pytest.raises(errors.BadRequest, match="malformed ping: field 'n' must be int, got str") as err:
        toy.send("ping", {"n": "one"})
    assert err.value.code is errors.Code.BAD_REQUEST
    with pytest.raises(errors.BadRequest, match="malformed ping: unknown fields \\['extra'\\]"):
        toy.send("ping", {"n": 1, "extra": 2})
    with pytest.raises(errors.BadRequest, match="the toy has no call 'pong'; its calls: ping, count, fail"):
        toy.send("pong", {})
    with pytest.raises(TypeError, match="ping takes one Ping"):
        toy.call("ping", Pong(n=1))
    with pytest.raises(TypeError, match="has no handler 'on_ping'"):
        calls.Handlers(TOY, object())
    with pytest.raises(ValueError, match="operation 'ping' defined twice"):
        calls.Table("twice", [TOY["ping"], TOY["ping"]])


@dataclasses.dataclass
class Keyed(Record):
    WHAT: typing.ClassVar[str] = "keyed"
    n: int
    token: typing.Optional[str] = None


@pytest.mark.unit
def test_the_table_has_each_calls_guard_check_its_credential_before_the_handler_runs():
    keyed = calls.Table("keyed", [calls.Call("ping", Ping, "on_ping", Pong, "n + 1"),
                                  calls.Call("add", Keyed, "on_add", int, "n + 1", auth="owner")])
    ran, checked = [], []

    class Server(Toy):
        def on_add(self, request):
            ran.append(request.n)
            return request.n + 1

        def guards(self):
            def owner(request, op):
                checked.append(op)
                protocol.check_token(request.token, "the secret", op, owner=True)
            return {"owner": owner}

    link = calls.Caller(keyed, calls.Handlers(keyed, Server()).handle)
    for token in (None, "", "a guess"):
        with pytest.raises(errors.Forbidden, match="add: not this session's owner secret") as err:
            link.call("add", n=1, **({} if token is None else {"token": token}))
        assert err.value.code is errors.Code.FORBIDDEN
    assert ran == [] and checked == ["add"] * 3  # refused before its handler ran
    assert link.call("add", n=1, token="the secret") == 2 and ran == [1]
    assert link.call("ping", n=1) == Pong(n=2) and checked == ["add"] * 4  # auth "none": no guard
    with pytest.raises(TypeError, match="Toy has no guard for auth 'owner' of keyed call 'add'"):
        calls.Handlers(keyed, type("Toy", (Server,), {"guards": lambda self: {}})())


@pytest.mark.unit
def test_each_server_guards_every_kind_of_credential_its_table_asks_for():
    """A server whose table names an auth it has no guard for does not start (Handlers' TypeError)."""
    from gensim_distw2v.shard import Shard
    from gensim_distw2v.worker.service import Worker

    for table, server in ((tables.DISPATCHER, Dispatcher()), (tables.SHARD, Shard({"port": 1})),
                          (tables.WORKER, Worker.__new__(Worker))):
        if table is tables.WORKER:
            server.counting = types.SimpleNamespace(check_lease=lambda request, op=None: None,
                                                    count=lambda request: None)
        handlers = calls.Handlers(table, server)
        guarded = {op for op, (_, guard, _, _) in handlers._ops.items() if guard is not None}
        assert guarded == {call.op for call in table if call.auth != "none"}
        if isinstance(server, Dispatcher):
            server.shutdown()


@pytest.mark.unit
@pytest.mark.parametrize("code", list(errors.Code))
def test_every_fault_travels_as_plain_msgpack_data_and_comes_back_as_itself(code):
    transport.first_use()  # what a process's first daemon or proxy does
    serializer = Pyro4.util.MsgpackSerializer()
    sent = errors.fault(code, f"what went wrong ({code.value}), and how to fix it")
    data, _compressed = serializer.serializeData(sent)
    plain = msgpack.unpackb(data, raw=False)  # plain data: a dict of str (no pickle, no class by name)
    assert plain == {"__class__": errors.FAULT_CLASS, "code": code.value, "message": str(sent)}
    back = serializer.deserializeData(data)
    assert type(back) is type(sent) and back.code is code and str(back) == str(sent)
    assert isinstance(back, ValueError)  # what a remote refusal has always been here


# signals that never leave their module's loop (a worker's session ending, a channel's connection failing
# under a merge that then goes by Pyro4): not errors a user or a caller outside the module meets
INTERNAL_SIGNALS = {"gensim_distw2v.worker.merger.SessionLost", "gensim_distw2v.io.channel.LinkBroken",
                    "gensim_distw2v.io.channel.LinkClosed"}


@pytest.mark.unit
def test_every_public_error_of_the_package_is_one_hierarchy_with_a_code():
    found, outside = set(), []
    for info in pkgutil.walk_packages(gensim_distw2v.__path__, "gensim_distw2v."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or not issubclass(cls, BaseException) or name.startswith("_"):
                continue
            found.add(f"{cls.__module__}.{name}")
            if not issubclass(cls, errors.Error) and f"{cls.__module__}.{name}" not in INTERNAL_SIGNALS:
                outside.append(f"{cls.__module__}.{name}")
    assert not outside, f"derive these from protocol.errors.Error (or list them as internal signals): {outside}"
    assert INTERNAL_SIGNALS <= found  # (the list names what exists)
    assert issubclass(errors.ClusterFault, ValueError) and issubclass(errors.ClusterError, RuntimeError)
    assert errors.ClusterError("no name server").code is None
    assert errors.ClusterError("failed", "poisoned").code is errors.Code.POISONED
    assert errors.ShardLostError("lost").code is errors.Code.SHARD_LOST
    again = copy.deepcopy(errors.ClusterError("failed", "poisoned"))
    assert again.code is errors.Code.POISONED and str(again) == "failed"
    assert errors.ShardLost("refused").code is errors.Code.SHARD_LOST and isinstance(errors.ShardLost(""), errors.Error)


@pytest.mark.unit
@pytest.mark.parametrize("code", ["shard_lost", "poisoned", "no_workers", "workers_dropped", "corpus_file",
                                  "session_closed"])
def test_the_error_train_raises_for_a_failed_session_keeps_its_code(code):
    from gensim_distw2v.client.training import DistributedTraining

    client = DistributedTraining(types.SimpleNamespace(settings=Settings()), {})
    err = client._failure(errors.Code(code), f"the session failed ({code})")
    assert isinstance(err, errors.Error) and err.code is errors.Code(code), (type(err), err.code)
    assert f"the session failed ({code})" in str(err)


@pytest.mark.unit
def test_a_forged_fault_is_an_internal_error_not_a_class_by_name():
    transport.first_use()
    serializer = Pyro4.util.MsgpackSerializer()
    forged = msgpack.packb({"__class__": errors.FAULT_CLASS, "code": "os.system", "message": "rm -rf"})
    back = serializer.deserializeData(forged)
    assert type(back) is errors.Internal and "unknown error code 'os.system'" in str(back)


@pytest.mark.cluster
def test_calls_and_faults_through_a_real_daemon():
    daemon = transport._Daemon(transport.Limits(), host="127.0.0.1", port=0)
    uri = daemon.register(endpoints.endpoint(TOY, Toy()))
    thread = threading.Thread(target=daemon.requestLoop, daemon=True)
    thread.start()
    link = endpoints.link(uri, TOY, timeout=10)
    try:
        assert link.call("ping", n=41) == Pong(n=42) and link.call("count", n=7) == 7
        for code in errors.Code:
            with pytest.raises(errors.ClusterFault) as err:
                link.call("fail", n=0, fault=code.value)
            assert type(err.value) is type(errors.fault(code, "")) and err.value.code is code
            assert str(err.value) == f"refused as {code.value}"
        with pytest.raises(ValueError, match="a plain refusal") as err:
            link.call("fail", n=0)
        assert type(err.value) is ValueError  # any other refusal: as before
        with pytest.raises(errors.BadRequest, match="malformed ping: missing field 'n'"):
            link.send("ping", {})
    finally:
        link.release()
        daemon.shutdown()


# ---------------------------------------------------------------------------------------------- the dispatcher
def _config(epochs=1):
    return protocol.SessionConfig(
        versions=versions(), params=protocol.TrainParams(sg=1, hs=0, negative=5, window=5, cbow_mean=1,
                                                         shrink_windows=True, sample=False, vector_size=4,
                                                         vocab_size=10, seed=1),
        arrays={"syn0": {"dtype": "float32", "shape": [10, 4]}, "syn1neg": {"dtype": "float32", "shape": [10, 4]},
                "lockf": {"dtype": "float32", "shape": [10]}, "cum_table": {"dtype": "uint32", "shape": [10]}},
        settings=Settings(sync_words=1000), damp_rows={"syn0": 2, "syn1neg": 2}, hot_rows=10, compute_loss=False,
        epochs=epochs, rng_state=protocol.RngState.of(np.random.RandomState(1)), workers=1)


def _report(jobs, flush=-1):
    return protocol.RoundReport(jobs=jobs, loss=0.0, flush=flush, exact=flush >= 0, merge_seconds=0.0, merge_cpu=0.0,
                                kernel_cpu=0.0, stall_seconds=0.0, bytes_up=0, bytes_down=0, turn=[0, 0])


@pytest.fixture
def dispatcher():
    out = Dispatcher()
    yield out
    out.shutdown()


S = {}  # the members' secrets (their hellos' replies)


def _opened(link):
    """A worker and a shard registered, a session opened, uploaded and started: its Opened."""
    S[WORKER] = link.call("hello", name=WORKER, uri="PYRO:w@127.0.0.1:1", versions=versions(), threads=2)
    S[SHARD] = link.call("shard_hello", name=SHARD, uri="PYRO:s@127.0.0.1:2", versions=versions())
    opened = link.call("open_session", _config())
    for name, dtype in (("lockf", np.float32), ("cum_table", np.uint32)):
        link.call("upload", session=opened.session, name=name, lo=0, token=opened.owner,
                  array=protocol.pack_array(np.arange(1, 11).astype(dtype)))
    assert link.call("start", session=opened.session, token=opened.owner) == 1
    return opened


@pytest.mark.unit
def test_the_dispatcher_serves_a_session_in_process_through_its_table(dispatcher):
    link = dispatcher.local()
    opened = _opened(link)
    sid = opened.session
    assert link.call("heartbeat", name=WORKER, secret=S[WORKER], known=None, wait=0.0) == protocol.Beat(session=sid, hello=False)
    joined = link.call("join", name=WORKER, secret=S[WORKER], session=sid)
    assert joined.rank == 0 and joined.shards == [[SHARD, "PYRO:s@127.0.0.1:2"]] and joined.token == opened.token
    job = protocol.Job(id=0, epoch=0, alpha=0.025, indices=np.arange(3, dtype=np.uint32),
                       offsets=np.array([0, 3], np.int64), raw_words=3, examples=1)
    with pytest.raises(errors.Forbidden, match="put_jobs: not this session's owner secret"):
        link.call("put_jobs", session=sid, jobs=[job.to_wire()], token=joined.token)  # a member's token
    assert link.call("put_jobs", session=sid, jobs=[job.to_wire()], token=opened.owner) == 1
    link.call("end_epoch", session=sid, epoch=0, token=opened.owner)
    batch = link.call("get_jobs", name=WORKER, secret=S[WORKER], session=sid, max_jobs=4, wait=0.0)
    assert [msg["id"] for msg in batch.jobs] == [0] and batch.drained == 0
    assert link.call("begin_round", name=WORKER, secret=S[WORKER], session=sid, turn=[0, 0], wait=0.0) is True
    link.call("round_done", name=WORKER, secret=S[WORKER], session=sid, report=_report([[0, 3]], flush=0))
    progress = link.call("progress", session=sid, token=opened.owner)
    assert progress.state == "running" and progress.failure is None
    assert progress.epoch(0).done == 1 and progress.flushed == 0 and progress.workers[WORKER].merges == 1
    assert link.call("status").session == protocol.SessionState(id=sid, state="running")
    with pytest.raises(errors.Forbidden, match="close: not this session's owner secret"):
        link.call("close", session=sid, token="a guess")
    link.call("close", session=sid, token=opened.owner)
    assert link.call("status").session is None
    with pytest.raises(errors.SessionClosed, match=f"unknown or closed session '{sid}'"):
        link.call("progress", session=sid)


@pytest.mark.unit
def test_progress_waits_for_the_epochs_end_and_no_longer(dispatcher):
    """A client waiting for an epoch's end asks once (a long poll), not twenty times a second: the
    answer comes when the last round report makes the epoch done, or when the wait is over."""
    import time

    link = dispatcher.local()
    opened = _opened(link)
    sid = opened.session
    link.call("join", name=WORKER, secret=S[WORKER], session=sid)
    job = protocol.Job(id=0, epoch=0, alpha=0.025, indices=np.arange(3, dtype=np.uint32),
                       offsets=np.array([0, 3], np.int64), raw_words=3, examples=1)
    link.call("put_jobs", session=sid, jobs=[job.to_wire()], token=opened.owner)
    link.call("end_epoch", session=sid, epoch=0, token=opened.owner)
    link.call("get_jobs", name=WORKER, secret=S[WORKER], session=sid, max_jobs=4, wait=0.0)
    began = time.monotonic()
    progress = link.call("progress", session=sid, token=opened.owner, epoch=0, wait=0.3)
    assert 0.25 <= time.monotonic() - began < 2.0 and progress.epoch(0).done == 0  # not done: the wait is over
    reporter = threading.Timer(0.2, lambda: dispatcher.local().call(
        "round_done", name=WORKER, secret=S[WORKER], session=sid, report=_report([[0, 3]], flush=0)))
    reporter.start()
    began = time.monotonic()
    progress = link.call("progress", session=sid, token=opened.owner, epoch=0, wait=5.0)
    waited = time.monotonic() - began
    reporter.join()
    assert 0.1 <= waited < 2.0, waited  # answered by the report, not at the end of its wait
    assert progress.epoch(0).done == 1 and progress.flushed == 0
    began = time.monotonic()  # an epoch the session has not begun: no wait (and no entry made for it)
    link.call("progress", session=sid, token=opened.owner, epoch=7, wait=5.0)
    assert time.monotonic() - began < 1.0 and "7" not in link.call("progress", session=sid).epochs
    for fields, message in ((dict(epoch=0, wait=6.0), "wait must be a number of seconds in \\[0, 5\\]"),
                            (dict(wait=1.0), "a wait needs the epoch"), (dict(epoch=-1), "epoch must be >= 0")):
        with pytest.raises(errors.BadRequest, match=message):
            link.call("progress", session=sid, **fields)


@pytest.mark.unit
def test_a_shards_heartbeat_waits_while_the_dispatchers_session_is_what_it_was_told(dispatcher):
    """A shard that does not hold the dispatcher's session yet says which session it was last told
    of: the same session is no news, so its heartbeat waits (it used to be answered at once, again
    and again, until the client opened the session on it)."""
    import time

    link = dispatcher.local()
    opened = _opened(link)
    began = time.monotonic()
    # news: a session it was not told of
    beat = link.call("shard_beat", name=SHARD, secret=S[SHARD], known=None, wait=0.3)
    assert beat.session == opened.session and time.monotonic() - began < 0.25
    # who may open the session on it: a digest of its own capability, never of the owner's secret itself
    assert beat.owner == protocol.owner_digest(protocol.shard_capability(opened.owner, opened.session, 0))
    assert opened.owner not in repr(beat) and beat.owner != protocol.owner_digest(opened.owner)
    began = time.monotonic()
    beat = link.call("shard_beat", name=SHARD, secret=S[SHARD], known=opened.session, wait=0.3)
    assert beat.session == opened.session and time.monotonic() - began >= 0.25
    # and the shard says so: holding nothing, its heartbeat names the session it was told of
    from gensim_distw2v.shard.service import Shard

    shard = Shard({"port": 1})
    assert shard.held is None and shard.beat_request().known is None
    shard.on_beat(None, shard.beat_request(), beat)
    assert shard.told == opened.session and shard.beat_request().known == opened.session


@pytest.mark.unit
def test_the_dispatcher_refuses_with_the_code_of_each_refusal(dispatcher):
    link = dispatcher.local()
    with pytest.raises(errors.NoShard, match="no parameter shard is registered"):
        link.call("open_session", _config())
    with pytest.raises(errors.VersionMismatch):
        link.call("hello", name=WORKER, uri="PYRO:w@127.0.0.1:1", versions={"gensim": "0.0"}, threads=1)
    with pytest.raises(errors.BadRequest, match="malformed hello: name must be gensim_distw2v.worker. and 1 to 64"):
        link.call("hello", name="mallory", uri="PYRO:w@127.0.0.1:1", versions=versions(), threads=1)
    with pytest.raises(errors.BadRequest, match="shard hello: threads must be left out"):
        link.call("shard_hello", name=SHARD, uri="PYRO:s@127.0.0.1:2", versions=versions(), threads=1)
    with pytest.raises(errors.BadRequest, match="heartbeat: wait must be a number of seconds in \\[0, 5\\]"):
        link.call("heartbeat", name=WORKER, wait=6.0)
    opened = _opened(link)
    other = protocol.WORKER_PREFIX + "w2"
    with pytest.raises(errors.UnknownMember, match=f"unknown worker '{other}': say hello first"):
        link.call("join", name=other, session=opened.session)
    S[other] = link.call("hello", name=other, uri="PYRO:w@127.0.0.1:3", versions=versions(), threads=1)
    with pytest.raises(errors.NotInSession, match=f"worker {other} is not a member of session"):
        link.call("get_jobs", name=other, secret=S[other], session=opened.session, max_jobs=1, wait=0.0)
    with pytest.raises(errors.MemberConflict, match="registered and alive on another connection"):
        dispatcher.cluster.workers[other].connection = "another connection"
        link.call("hello", name=other, uri="PYRO:w@127.0.0.1:3", versions=versions(), threads=1)
    with pytest.raises(errors.MemberConflict, match="registered and alive on another connection"):  # a shard too
        dispatcher.cluster.shards[SHARD].connection = "another connection"
        link.call("shard_hello", name=SHARD, uri="PYRO:s@127.0.0.1:2", versions=versions())
    with pytest.raises(errors.BadRequest, match="put_jobs: 65 jobs in one call, at most 64"):
        link.call("put_jobs", session=opened.session, jobs=[{}] * 65, token=opened.owner)


@pytest.mark.unit
def test_a_member_calls_for_its_own_name_only(dispatcher):
    """A member holding the key (threat model c) cannot beat, report, quit or leave for another:
    every call naming a member carries the secret its hello's reply gave it."""
    link = dispatcher.local()
    opened = _opened(link)
    sid, other = opened.session, protocol.WORKER_PREFIX + "w2"
    S[other] = link.call("hello", name=other, uri="PYRO:w@127.0.0.1:3", versions=versions(), threads=1)
    assert len(S[other]) >= 16 and S[other] != S[WORKER]
    link.call("join", name=WORKER, secret=S[WORKER], session=sid)
    forged = protocol.NodeMetrics(role="worker", session=sid, seconds=1.0, words=0, cpu=1.0, kernel_cpu=0.5,
                                  merge_cpu=0.25, rss=10, peak_rss=20, bytes_sent=1, bytes_received=2, threads=1)
    for op, fields in (("heartbeat", dict(known=sid, wait=0.0, metrics=forged)),
                       ("join", dict(session=sid)), ("get_jobs", dict(session=sid, max_jobs=1, wait=0.0)),
                       ("begin_round", dict(session=sid, turn=[0, 0], wait=0.0)),
                       ("round_done", dict(session=sid, report=_report([[0, 3]]))),
                       ("file_check", dict(session=sid, problem="forged")),
                       ("quit_session", dict(session=sid, reason="forged")), ("leave", {})):
        for secret in (S[other], "", None):
            with pytest.raises(errors.Forbidden, match=f"names {WORKER} without its secret"):
                link.call(op, name=WORKER, **({} if secret is None else {"secret": secret}), **fields)
    with pytest.raises(errors.Forbidden, match=f"shard_beat names {SHARD} without its secret"):
        link.call("shard_beat", name=SHARD, secret=S[other], known=sid, wait=0.0, poisoned={"0": "forged"})
    with pytest.raises(errors.Forbidden, match=f"shard_leave names {SHARD} without its secret"):
        link.call("shard_leave", name=SHARD, secret=S[WORKER])
    assert set(dispatcher.cluster.workers) == {WORKER, other} and SHARD in dispatcher.cluster.shards
    assert link.call("progress", session=sid, token=opened.owner).state == "running"
    assert WORKER not in dispatcher.cluster.book.latest  # no forged metrics kept
    link.call("leave", name=WORKER, secret=S[WORKER])  # its own: taken
    assert set(dispatcher.cluster.workers) == {other}


@pytest.mark.unit
def test_only_the_sessions_shards_can_report_a_poisoned_merge(dispatcher):
    """A keyed member outside the session cannot fail it and blame an innocent worker."""
    link = dispatcher.local()
    opened = _opened(link)
    sid, outsider = opened.session, protocol.SHARD_PREFIX + "s2"
    link.call("join", name=WORKER, secret=S[WORKER], session=sid)
    S[outsider] = link.call("shard_hello", name=outsider, uri="PYRO:s@127.0.0.1:4", versions=versions())
    assert dispatcher.cluster.shard_index(dispatcher.cluster.session, outsider) < 0
    link.call("shard_beat", name=outsider, secret=S[outsider], known=sid, wait=0.0, poisoned={"0": "forged"})
    progress = link.call("progress", session=sid, token=opened.owner)
    assert progress.state == "running" and progress.failure is None
    link.call("shard_beat", name=SHARD, secret=S[SHARD], known=sid, wait=0.0, poisoned={"0": "beyond the bound"})
    assert link.call("progress", session=sid, token=opened.owner).failure.code == "poisoned"


@pytest.mark.unit
def test_a_lost_shard_fails_the_session_and_progress_says_why(dispatcher):
    link = dispatcher.local()
    opened = _opened(link)
    sid = opened.session
    link.call("join", name=WORKER, secret=S[WORKER], session=sid)
    link.call("shard_leave", name=SHARD, secret=S[SHARD])
    progress = link.call("progress", session=sid, token=opened.owner)
    assert progress.state == "failed" and progress.failure.code == "shard_lost"
    assert progress.failure.message == f"lost parameter shard {SHARD} (it shut down)"
    assert type(progress.failure.fault()) is errors.ShardLost
    with pytest.raises(errors.ShardLost, match=f"lost parameter shard {SHARD}"):
        link.call("get_jobs", name=WORKER, secret=S[WORKER], session=sid, max_jobs=1, wait=0.0)
    assert link.call("heartbeat", name=WORKER, secret=S[WORKER], known=sid, wait=0.0).session is None  # workers drop it
    assert link.call("status").session.state == "failed"
    link.call("close", session=sid, token=opened.owner)
    assert link.call("status").session is None


@pytest.mark.unit
def test_a_poisoned_merge_and_every_worker_quitting_fail_the_session(dispatcher):
    link = dispatcher.local()
    opened = _opened(link)
    sid = opened.session
    link.call("join", name=WORKER, secret=S[WORKER], session=sid)
    beat = link.call("shard_beat", name=SHARD, secret=S[SHARD], known=sid, wait=0.0, poisoned={"0": "a value beyond the bound"})
    assert beat.session == sid
    failure = link.call("progress", session=sid).failure
    assert failure.code == "poisoned" and failure.message.endswith(
        f"worker {WORKER}: shard {SHARD} refused its merge: a value beyond the bound")
    link.call("close", session=sid, token=opened.owner)
    opened = link.call("open_session", _config())
    for name, dtype in (("lockf", np.float32), ("cum_table", np.uint32)):
        link.call("upload", session=opened.session, name=name, lo=0, token=opened.owner,
                  array=protocol.pack_array(np.arange(1, 11).astype(dtype)))
    link.call("start", session=opened.session, token=opened.owner)
    link.call("join", name=WORKER, secret=S[WORKER], session=opened.session)
    link.call("quit_session", name=WORKER, secret=S[WORKER], session=opened.session, reason="out of memory")
    failure = link.call("progress", session=opened.session).failure
    assert failure.code == "no_workers" and f"worker {WORKER}: out of memory" in failure.message


# ---------------------------------------------------------------------------------------------- the docs
@pytest.mark.unit
def test_the_design_document_shows_every_call_table_as_it_is():
    with open(os.path.join(ROOT, "docs", "design.rst"), encoding="utf-8") as fin:
        text = fin.read()
    for table in tables.TABLES:
        begin = tables.BEGIN.format(server=table.server)
        assert begin in text, f"docs/design.rst has no table of the {table.server}'s calls"
        shown = text[text.index(begin):text.index(tables.END, text.index(begin)) + len(tables.END)]
        assert shown == tables.rst(table), (
            f"docs/design.rst's table of the {table.server}'s calls is not the table's: regenerate it with "
            f"python -m gensim_distw2v.protocol.tables docs/design.rst")
        listed = [line.split("``")[1] for line in shown.splitlines() if line.startswith("``")]
        assert listed == table.ops()


@pytest.mark.unit
def test_each_call_says_who_may_make_it_how_often_and_on_which_transport():
    for table in tables.TABLES:
        for call in table:
            credential = calls.AUTHS[call.auth]
            assert credential is None or credential in {f.name for f in dataclasses.fields(call.request)}
            assert call.cadence in calls.CADENCES
    # a credential the request cannot carry, an unknown kind: refused where the table is written
    with pytest.raises(TypeError, match="StatusRequest has no field 'token', the credential of auth 'owner'"):
        calls.Call("x", protocol.StatusRequest, "x", None, auth="owner")
    with pytest.raises(ValueError, match="auth must be one of"):
        calls.Call("x", protocol.StatusRequest, "x", None, auth="anyone")
    with pytest.raises(ValueError, match="cadence must be one of"):
        calls.Call("x", protocol.StatusRequest, "x", None, cadence="hourly")
    # what is read from the table: the bulk channel's calls (a shard serves them, a worker's merges and
    # counts send them) and the projection's calls by cadence
    from gensim_distw2v import projection

    assert tables.SHARD.ops(bulk=True) == ["merge", "count_add"]
    assert tables.SHARD.ops(cadence="word", bulk=True) == ["merge"]
    assert set(projection.PER_SECOND_CALLS) == {"status", "progress", "heartbeat", "round_done", "shard_beat"}
    assert set(projection.SESSION_CALLS) == set(tables.SHARD.ops(cadence="session")) | {"channel_hello"}
    assert {"join", "hello", "end_epoch"} <= set(projection.DISPATCHER_SESSION_CALLS)
    assert not set(projection.DISPATCHER_SESSION_CALLS) & {"put_jobs", "get_jobs", "checkpoint", "leave"}
    # every call of the session's client but its first carries the owner's secret (progress: when it is the client's)
    client_calls = {"upload", "start", "put_jobs", "end_epoch", "open_file_epoch", "checkpoint", "close"}
    assert {op for op in client_calls if tables.DISPATCHER[op].auth == "owner"} == client_calls
    assert tables.DISPATCHER["progress"].auth == "watcher"
    # the session's arrays and weights go to its client and its workers only (its id is public: status)
    assert tables.DISPATCHER["download"].auth == tables.SHARD["download"].auth == "token"
    assert {call.op for call in tables.DISPATCHER if call.auth == "none"} == {"status", "open_session", "hello",
                                                                            "shard_hello"}


@pytest.mark.unit
def test_a_refused_key_is_told_from_no_server_by_the_errors_type_not_its_text():
    """Pyro4's proxy wraps what its handshake raised in a CommunicationError; a key the peer refuses (or a
    missing one) is a SecurityError beneath it, whatever either message says."""
    from Pyro4.errors import CommunicationError, SecurityError

    def wrapped(cause, text="cannot connect to 127.0.0.1:1: something"):
        try:
            try:
                raise cause
            except Exception as err:
                raise CommunicationError(text) from err
        except CommunicationError as outer:
            return outer

    assert transport._refused_for_its_key(wrapped(SecurityError("a reworded message")))
    assert transport._refused_for_its_key(SecurityError("x"))
    assert not transport._refused_for_its_key(wrapped(ConnectionRefusedError(111, "hmac in the text, not a key")))
    assert not transport._refused_for_its_key(CommunicationError("message hmac mismatch"))  # the text alone: no
