"""Malformed payloads against a running dispatcher, shard and worker (hypothesis): all refused, all keep serving.

One real cluster (name server, dispatcher, one shard, one worker) with an open session. A registered
member that is not a real worker (``gensim_distw2v.worker.fuzz``) sends merge parts to the shard and
round reports to the dispatcher, so the deepest checks are reached; every payload is a valid message
with one defect (wrong type, range, dtype, shape, byte count, row order, non-finite value, missing or
unknown field), or garbage in place of the arguments, or raw bytes on the daemons' sockets.
Afterwards the dispatcher's and the shard's memory have not grown much and a real training works.
"""
import dataclasses
import socket

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gensim_distw2v import LocalCluster, Word2Vec, protocol
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.protocol.constants import WORKER_PREFIX
from gensim_distw2v.protocol import tables
from gensim_distw2v.client.training import DistributedTraining, find_dispatcher
from gensim_distw2v.versions import versions
from gensim_distw2v.core.jobs import Job

pytestmark = pytest.mark.cluster

FAKE = WORKER_PREFIX + "fuzz"
PARAMS = dict(vector_size=8, min_count=2, seed=3, workers=1, epochs=1)
EXAMPLES = 400  # per test below: 1,200 generated payloads in all, and 200 raw byte strings

garbage = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.floats() | st.text(max_size=12)
    | st.binary(max_size=48),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10)
not_int = garbage.filter(lambda v: not isinstance(v, int) or isinstance(v, bool))
not_number = garbage.filter(lambda v: not isinstance(v, (int, float)) or isinstance(v, bool))
not_bool = garbage.filter(lambda v: not isinstance(v, bool))


@pytest.fixture(scope="module")
def cluster(lee_corpus):
    with LocalCluster(n_workers=1, worker_timeout=600) as cluster:
        model = Word2Vec(lee_corpus[:50], distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        training = DistributedTraining(model, cluster.ns_conf)
        proxy = find_dispatcher(cluster.ns_conf)
        config, arrays = training.setup.config(1, False, 1)
        sid, links, _resumed = training.setup.open(proxy, config, arrays)
        secret = proxy.call("hello", name=FAKE, uri="PYRO:fuzz@127.0.0.1:1", versions=versions(), threads=1)
        joined = proxy.call("join", name=FAKE, secret=secret, session=sid)
        rank = joined.rank
        shard = links.links[0]
        # the shard gives the fake worker a slot
        shard.call("download", session=sid, name="syn1neg", lo=0, hi=1, rank=rank, token=joined.token)
        cluster.session = {"sid": sid, "vocab": len(model.wv), "size": model.wv.vector_size, "rank": rank,
                           "proxy": proxy, "shard": shard, "model": model, "token": joined.token, "secret": secret,
                           "owner": training.run.token}
        for _ in range(50):  # warm up (imports, caches) before the memory baseline
            refused(shard.send, "merge", {**valid_part(cluster.session), "lo": -1})
            refused(proxy.send, "round_done", {"name": FAKE, "secret": secret, "session": sid,
                                               "report": {**valid_report(), "flush": -2}})
        cluster.session["rss"] = {role: psutil.Process(cluster.processes[role].pid).memory_info().rss
                                  for role in ("dispatcher", "shard-0")}
        yield cluster
        links.close(sid)
        transport.release(proxy)


REQUIRED_PART_FIELDS = {f.name for f in dataclasses.fields(protocol.MergePart) if f.default is dataclasses.MISSING}


def valid_part(session):
    rows = np.array([0, 2, 5], dtype=np.uint32)
    values = np.full((3, session["size"]), 0.0, dtype=np.float16)
    return {"session": session["sid"], "rank": session["rank"], "token": session["token"], "lo": 0,
            "hi": session["vocab"], "hold_back": 0.0,
            "hot_rows": -1, "tree_hot_rows": -1, "exact": False, "wanted": protocol.pack_wanted([3, 7], 0, session["vocab"]),
            "matrices": {"syn1neg": {"rows": protocol.pack_array(rows), "values": protocol.pack_array(values)}}}


def valid_report():
    return {"jobs": [], "loss": 0.0, "flush": -1, "exact": False, "merge_seconds": 0.0, "merge_cpu": 0.0,
            "kernel_cpu": 0.0, "stall_seconds": 0.0, "bytes_up": 0, "bytes_down": 0, "turn": [0, 0]}


def valid_int8_part(session):
    """A valid part with int8 values: levels and a float32 scale per row."""
    part = valid_part(session)
    part["matrices"]["syn1neg"] = protocol.pack_deltas(np.array([0, 2, 5], dtype=np.uint32),
                                                   np.full((3, session["size"]), -127, dtype=np.int8),
                                                   np.array([0.0, 1e-7, 2e-7], dtype=np.float32))
    return part


def valid_job(session):
    job = Job(indices=np.array([1, 2, 3], dtype=np.uint32), offsets=np.array([0, 3], dtype=np.int64),
              alpha=0.025, raw_words=3, examples=1)
    return protocol.Job.of(10 ** 6, 0, job).to_wire()


def array_defects(message, allowed, n_rows_bad):
    """Strategies that spoil one array message."""
    shape, data = message["shape"], bytes(message["data"])
    wrong_dtypes = [d for d in ("float64", "int8", "uint32", "float32", "float16", "int64", "object", "<U4", "V8",
                                "complex128", "") if d not in allowed]
    return st.one_of(
        st.sampled_from(wrong_dtypes).map(lambda d: {**message, "dtype": d}),
        st.lists(st.integers(-5, 2 ** 41), min_size=0, max_size=3).filter(lambda s: s != shape)
        .map(lambda s: {**message, "shape": s}),
        st.integers(1, max(1, len(data))).map(lambda k: {**message, "data": data[:-k]}),
        st.binary(min_size=1, max_size=16).map(lambda extra: {**message, "data": data + extra}),
        not_number.map(lambda v: {**message, "shape": v}),
        st.sampled_from(["dtype", "shape", "data"]).map(lambda k: {f: v for f, v in message.items() if f != k}),
        n_rows_bad,
    )


@st.composite
def bad_merge_part(draw, session):
    part = valid_part(session)
    matrix = part["matrices"]["syn1neg"]
    vocab, size = session["vocab"], session["size"]
    bad_rows = st.sampled_from([[5, 2, 0], [0, 2, 2], [0, 2, vocab], [0, 2, vocab + 10 ** 6]]).map(
        lambda r: {**matrix, "rows": protocol.pack_array(np.array(r, dtype=np.uint32))})
    bad_values = st.sampled_from([np.nan, np.inf, -np.inf]).map(
        lambda x: {**matrix, "values": protocol.pack_array(np.full((3, size), x, dtype=np.float16))})
    field = draw(st.sampled_from(["lo", "hi", "range", "matrices", "name", "rows", "values", "scales", "hold_back",
                                  "hot_rows", "tree_hot_rows", "exact", "session", "rank", "wanted", "missing",
                                  "unknown"]))
    if field == "session":
        part["session"] = draw(garbage.filter(lambda v: v != session["sid"]))
    elif field == "rank":
        part["rank"] = draw(not_int | st.integers(-2 ** 63, -1))
    elif field == "unknown":
        part[draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in part))] = draw(garbage)
    elif field == "lo":
        part["lo"] = draw(not_int | st.integers(-2 ** 63, -1) | st.integers(vocab + 1, 2 ** 63))
    elif field == "hi":
        part["hi"] = draw(not_int | st.integers(vocab + 1, 2 ** 63))
    elif field == "range":  # a valid range that leaves out some of the rows sent
        part["lo"], part["hi"] = draw(st.sampled_from([(1, vocab), (0, 5), (3, 4)]))
    elif field == "matrices":
        part["matrices"] = draw(not_bool.filter(lambda v: not isinstance(v, dict) or v))
        if isinstance(part["matrices"], dict):
            part["matrices"] = {"syn0_" + k: v for k, v in part["matrices"].items()}
    elif field == "name":
        part["matrices"] = {draw(st.sampled_from(["syn1", "syn0lockf", "cum_table", ""])): matrix}
    elif field == "rows":
        part["matrices"]["syn1neg"] = {**matrix, "rows": draw(array_defects(matrix["rows"], ("uint32",), bad_rows))}
    elif field == "values":
        part["matrices"]["syn1neg"] = {**matrix, "values": draw(array_defects(
            matrix["values"], ("float32", "float16"), bad_values))}
    elif field == "scales":  # int8 values: their scales missing, malformed or out of range; scales on float16
        int8 = valid_int8_part(session)["matrices"]["syn1neg"]
        bad_scales = st.sampled_from([np.nan, np.inf, -1e-3, 1e37]).map(
            lambda x: {**int8["scales"], "data": np.array([0.1, x, 0.1], dtype=np.float32).tobytes()})
        part["matrices"]["syn1neg"] = draw(st.one_of(
            array_defects(int8["scales"], ("float32",), bad_scales).map(lambda sc: {**int8, "scales": sc}),
            st.just({f: v for f, v in int8.items() if f != "scales"}),
            st.just({**matrix, "scales": int8["scales"]})))
    elif field == "hold_back":
        part["hold_back"] = draw(not_number | st.floats(1.0, 1e300) | st.floats(-1e300, -1e-9)
                                 | st.sampled_from([float("nan"), float("inf")]))
    elif field in ("hot_rows", "tree_hot_rows"):
        part[field] = draw(not_int | st.integers(-2 ** 63, -2))
    elif field == "exact":
        part[field] = draw(not_bool)
    elif field == "wanted":  # rows out of range or out of order, a bitmap of the wrong length, not an array
        bad_wanted = st.sampled_from([[7, 3], [3, 3], [3, vocab], [vocab + 10 ** 6]]).map(
            lambda r: protocol.pack_array(np.array(r, dtype=np.uint32))) | st.integers(0, vocab // 8 + 3).filter(
            lambda n: n != (vocab + 7) // 8).map(lambda n: protocol.pack_array(np.zeros(n, np.uint8)))
        part["wanted"] = draw(array_defects(part["wanted"], ("uint32", "uint8"), bad_wanted)
                              | not_bool.filter(lambda v: v is not None and not isinstance(v, dict)))
    else:  # a field without a default (those with one, added later, may be left out)
        del part[draw(st.sampled_from(sorted(set(part) & REQUIRED_PART_FIELDS)))]
    return part


@st.composite
def bad_report(draw):
    report = valid_report()
    field = draw(st.sampled_from(["jobs", "loss", "flush", "exact", "merge_seconds", "merge_cpu", "kernel_cpu",
                                  "stall_seconds", "bytes_up", "bytes_down", "turn", "missing", "unknown",
                                  "not a dict"]))
    if field == "turn":
        report["turn"] = draw(not_bool.filter(lambda v: not isinstance(v, list)) | st.sampled_from(
            [[], [0], [0, 0, 0], [-1, 0], [0, -3], [0, 1.5], [True, 0], ["0", 1], [2 ** 63, 0]]))
    elif field == "flush":
        report["flush"] = draw(not_int | st.integers(-2 ** 63, -2))
    elif field == "exact":
        report["exact"] = draw(not_bool)
    elif field == "jobs":
        report["jobs"] = draw(not_bool.filter(lambda v: not isinstance(v, list) or v).map(
            lambda v: [v] if isinstance(v, list) else v))
        if isinstance(report["jobs"], list):
            report["jobs"] = [draw(st.sampled_from([[1], [1, 2, 3], [-1, 5], [1, True], "xy", [1.5, 2]]))]
    elif field in ("bytes_up", "bytes_down"):
        report[field] = draw(not_int | st.integers(-2 ** 63, -1))
    elif field in ("loss", "merge_seconds", "merge_cpu", "kernel_cpu", "stall_seconds"):
        report[field] = draw(not_number | st.sampled_from([float("nan"), float("inf")])
                             | (st.floats(-1e300, -1e-9) if field != "loss" else st.nothing()))
    elif field == "missing":
        del report[draw(st.sampled_from(sorted(report)))]
    elif field == "unknown":
        report[draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in report))] = draw(garbage)
    else:
        return draw(not_bool.filter(lambda v: not isinstance(v, dict)))
    return report


@st.composite
def bad_job(draw, session):
    job = valid_job(session)
    vocab = session["vocab"]
    field = draw(st.sampled_from(["id", "epoch", "alpha", "indices", "offsets", "raw_words", "examples", "missing",
                                  "not a dict"]))
    if field in ("id", "raw_words", "examples"):
        job[field] = draw(not_int | st.integers(-2 ** 63, -1))
    elif field == "epoch":
        job["epoch"] = draw(not_int | st.integers(-2 ** 63, -1) | st.integers(1, 2 ** 63))  # the session has 1 epoch
    elif field == "alpha":
        job["alpha"] = draw(not_number | st.sampled_from([float("nan"), float("inf"), -0.5, 10.0, 1e9]))
    elif field == "indices":
        bad = st.sampled_from([[vocab], [1, 2, vocab + 7], [2 ** 32 - 1]]).map(
            lambda r: {**job["indices"], "data": np.array(r[:1] * 3 if len(r) == 1 else r, dtype=np.uint32).tobytes()})
        job["indices"] = draw(array_defects(job["indices"], ("uint32",), bad))
    elif field == "offsets":
        bad = st.sampled_from([[0, 4], [1, 3], [3, 0], [0, 2, 1]]).map(
            lambda r: protocol.pack_array(np.array(r, dtype=np.int64)))
        job["offsets"] = draw(array_defects(job["offsets"], ("int64",), bad))
    elif field == "missing":
        del job[draw(st.sampled_from(sorted(job)))]
    else:
        return draw(not_bool.filter(lambda v: not isinstance(v, dict)))
    return job


def refused(call, *args):
    with pytest.raises(Exception) as info:  # noqa: PT011 - any remote error; the daemon must survive it
        call(*args)
    assert not isinstance(info.value, transport.CommunicationError), f"the daemon dropped the call: {info.value}"
    return info.value


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@SETTINGS
@given(data=st.data())
def test_malformed_merge_parts_are_refused(cluster, data):
    s = cluster.session
    part = data.draw(bad_merge_part(s))
    error = refused(s["shard"].send, "merge", part)
    assert ("merge part" in str(error) or "syn" in str(error) or "malformed" in str(error)
            or "holds no session" in str(error) or "session's token" in str(error)), error


@SETTINGS
@given(data=st.data())
def test_malformed_round_reports_are_refused(cluster, data):
    s = cluster.session
    error = refused(s["proxy"].send, "round_done", {"name": FAKE, "secret": s["secret"], "session": s["sid"],
                                                    "report": data.draw(bad_report())})
    assert "round report" in str(error) or "malformed round_done: field 'report'" in str(error), error


def test_valid_parts_are_taken(cluster):
    """The valid parts and report the strategies spoil are themselves accepted: float16 and int8 values."""
    s = cluster.session
    # a non-finite part (the fuzzing sends some) barred this rank from the session: join again
    s["rank"] = s["proxy"].call("join", name=FAKE, secret=s["secret"], session=s["sid"]).rank
    s["shard"].call("download", session=s["sid"], name="syn1neg", lo=0, hi=1, rank=s["rank"], token=s["token"])
    for part in (valid_part(s), valid_int8_part(s)):
        reply = s["shard"].call("merge", protocol.MergePart.from_wire(part))
        assert isinstance(reply.matrices, dict) and isinstance(reply.values, dict)
    merges = s["proxy"].call("progress", session=s["sid"]).merges
    s["proxy"].call("round_done", name=FAKE, secret=s["secret"], session=s["sid"],
                    report=protocol.RoundReport.from_wire(valid_report()))
    assert s["proxy"].call("progress", session=s["sid"]).merges == merges + 1


@SETTINGS
@given(data=st.data())
def test_malformed_jobs_are_refused(cluster, data):
    s = cluster.session
    job = data.draw(bad_job(s))
    # one bad job: all refused
    refused(s["proxy"].send, "put_jobs", {"session": s["sid"], "jobs": [valid_job(s), job], "token": s["owner"]})


def test_too_many_jobs_in_one_call_are_refused_and_none_queued(cluster):
    s = cluster.session
    put = s["proxy"].call("progress", session=s["sid"]).epoch(0).put
    error = refused(s["proxy"].send, "put_jobs", {"session": s["sid"], "jobs": [valid_job(s)] * 65,
                                                  "token": s["owner"]})
    assert "65 jobs in one call, at most 64" in str(error), error
    assert s["proxy"].call("progress", session=s["sid"]).epoch(0).put == put


# every call of the tables, names that are not calls (private methods, old remote methods), and Pyro4's own
METHODS = tables.DISPATCHER.ops() + ["no_such_method", "_session", "__init__", "shutdown", "_checkpoint_start",
                                     "_begin_checkpoint", "call", "local"]
SHARD_METHODS = tables.SHARD.ops() + ["_held", "heartbeat_loop", "no_such_method", "_restore", "_checkpoint",
                                      "_write_checkpoint", "call", "beat_request"]


def garbage_call(link, method, args, raw):
    """``method`` with ``args`` (garbage): as a call of the link's table (``raw``: as a remote method of its own,
    which the daemon does not have but ``call``); _pyroInvoke sends it as it is."""
    if raw:
        return link.connection._pyroInvoke(method, args, {})
    return link.connection._pyroInvoke("call", [method] + args, {})


def takes_empty(table, method, args):
    """Whether ``args`` is a valid call after all: one empty message to a call whose request has no fields."""
    return method in table and args == [{}] and not table[method].request.names()


@SETTINGS
@given(method=st.sampled_from(METHODS), args=st.lists(garbage, min_size=1, max_size=4), raw=st.booleans())
def test_garbage_calls_are_refused(cluster, method, args, raw):
    s = cluster.session
    if not raw and takes_empty(tables.DISPATCHER, method, args):
        garbage_call(s["proxy"], method, args, raw)
        return
    refused(garbage_call, s["proxy"], method, args, raw)


@SETTINGS
@given(method=st.sampled_from(SHARD_METHODS), args=st.lists(garbage, min_size=1, max_size=4), raw=st.booleans())
def test_garbage_calls_to_the_shard_are_refused(cluster, method, args, raw):
    s = cluster.session
    if method == "close" and not raw and len(args) == 1 and isinstance(args[0], str):  # a session not held: no error
        s["shard"].call("close", session=args[0] + "-not-held", token="any token")
        assert s["shard"].call("status").session.id == s["sid"]
        return
    if not raw and takes_empty(tables.SHARD, method, args):
        garbage_call(s["shard"], method, args, raw)
        return
    refused(garbage_call, s["shard"], method, args, raw)


def test_raw_bytes_and_then_real_training(cluster, lee_corpus):
    s = cluster.session
    uris = [str(s["proxy"].connection._pyroUri), str(s["shard"].connection._pyroUri)] + [
        str(transport.lookup(cluster.ns_conf, name)) for name in
        transport.list_names(cluster.ns_conf, WORKER_PREFIX)]
    rng = np.random.default_rng(0)
    for i in range(200):
        host, port = uris[i % len(uris)].split("@")[1].rsplit(":", 1)
        junk = rng.bytes(int(rng.integers(1, 300)))
        if i % 4 == 0:
            junk = b"PYRO" + junk  # looks like Pyro's header, then nonsense
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            try:
                sock.sendall(junk)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(4096):
                    pass
            except OSError:
                pass  # the daemon hung up on the junk (maybe before we finished): fine, if it goes on serving
    # every daemon alive and serving, a wrong HMAC key is refused, memory did not run away
    assert s["proxy"].call("status").session.id == s["sid"]
    assert s["shard"].call("status").session.id == s["sid"]
    for uri in uris[2:]:
        worker = endpoints.link(uri, tables.WORKER, cluster.ns_conf["hmac_key"], timeout=10)
        assert worker.call("status").name.startswith(WORKER_PREFIX)
        worker.release()
    stranger = endpoints.link(uris[0], tables.DISPATCHER, hmac_key=b"not the key", timeout=10)
    with pytest.raises(transport.CommunicationError):
        stranger.call("status")
    stranger.release()
    for role, rss in s["rss"].items():
        grown = (psutil.Process(cluster.processes[role].pid).memory_info().rss - rss) / 2 ** 20
        assert grown < 30, f"the {role}'s memory grew by {grown:.0f} MB over the fuzzing"
    s["proxy"].call("close", session=s["sid"], token=s["owner"])
    model = Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    assert model.cluster_stats["raw_words"] == sum(len(x) for x in lee_corpus)


@SETTINGS
@given(name=st.text(max_size=80) | st.text(min_size=60, max_size=200, alphabet="ab.-_"), uri=garbage | st.text(max_size=700))
def test_hellos_with_bad_names_or_uris_are_refused(cluster, name, uri):
    s = cluster.session
    full = WORKER_PREFIX + name
    if len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-") for c in name) and name \
            and isinstance(uri, str) and uri.startswith("PYRO:") and len(uri) <= 512:
        return  # a valid hello (hypothesis finds few); the others:
    error = refused(s["proxy"].send, "hello", {"name": full, "uri": uri, "versions": versions(), "threads": 1})
    assert "malformed hello" in str(error), error
    assert full not in s["proxy"].call("status").workers
