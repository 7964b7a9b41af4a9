"""Chunked transfers (gensim_distw2v.protocol.transfers) and the shard's call table, in-process."""
import numpy as np
import pytest

from gensim_distw2v import protocol
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.protocol import calls, constants, errors, tables, transfers
from gensim_distw2v.versions import versions

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("part_bytes", [1, 40, 100, 10 ** 6])
def test_rows_go_up_and_come_down_in_parts_through_any_layout(part_bytes):
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((23, 5)).astype(np.float32)
    layout = ShardLayout(3)
    got = np.zeros_like(matrix)
    for shard in range(3):
        sent, calls_made = {}, []

        def send(lo, part, sent=sent):
            sent[lo] = protocol.unpack_array(part, "part", "float32")
        transfers.send_in_parts(layout.rows_of(matrix, shard), part_bytes, send)
        held = np.concatenate([sent[lo] for lo in sorted(sent)])
        assert np.array_equal(held, layout.rows_of(matrix, shard))
        assert all(len(part) * 20 <= max(part_bytes, 20) for part in sent.values())  # at least one row a part

        def fetch(lo, hi, held=held, calls_made=calls_made):
            calls_made.append((lo, hi))
            return protocol.pack_array(held[lo:hi])
        transfers.fetch_rows(layout.rows_of(got, shard), part_bytes, fetch, "download")  # into the view
        assert calls_made == transfers.row_ranges(len(held), 20, part_bytes)
    assert np.array_equal(got, matrix)


def test_a_part_that_is_not_the_rows_asked_for_is_refused():
    target = np.zeros((10, 4), np.float32)
    with pytest.raises(ValueError, match=r"final syn0 must have shape \(4, 4\)"):
        transfers.fetch_rows(target, 64, lambda lo, hi: protocol.pack_array(np.zeros((hi - lo + 1, 4), np.float32)),
                             "final syn0")
    with pytest.raises(ValueError, match="must have dtype float32"):
        transfers.fetch_rows(target, 64, lambda lo, hi: protocol.pack_array(np.zeros((hi - lo, 4), np.float16)), "x")

    def refuse(part):
        raise RuntimeError("not finite")
    with pytest.raises(RuntimeError, match="not finite"):
        transfers.fetch_rows(target, 64, lambda lo, hi: protocol.pack_array(np.ones((hi - lo, 4), np.float32)), "x",
                             refuse)
    assert not target.any()  # a refused part is not written


def test_uploaded_parts_come_in_order_and_fit():
    target = np.zeros((6, 2), np.float32)
    part = protocol.pack_array(np.ones((4, 2), np.float32))
    assert transfers.receive_part(target, 0, 0, part, "upload: syn0 chunk") == 4
    with pytest.raises(ValueError, match="upload: syn0 chunk starts at 0, expected 4"):
        transfers.receive_part(target, 4, 0, part, "upload: syn0 chunk")
    with pytest.raises(ValueError, match=r"upload: syn0 chunk \[4, 8\) overflows 6 rows"):
        transfers.receive_part(target, 4, 4, part, "upload: syn0 chunk")
    with pytest.raises(ValueError, match="must have shape"):
        transfers.receive_part(target, 4, 4, protocol.pack_array(np.ones((2, 3), np.float32)), "upload")
    assert transfers.receive_part(target, 4, 4, protocol.pack_array(np.full((2, 2), 2, np.float32)), "up") == 6
    assert target[:4].sum() == 8 and target[4:].sum() == 8
    for lo, hi in ((-1, 2), (2, 1), (0, 7), (True, 2), (0, "2")):
        with pytest.raises(ValueError, match="outside"):
            transfers.check_part(target, lo, hi, "download")
    transfers.check_part(target, 0, 6, "download")
    with pytest.raises(ValueError, match="too many rows in one part"):
        transfers.check_part(np.zeros((2 ** 22, 64), np.float32), 0, 2 ** 22, "download")


def _local_shard(grant, **spec_fields):
    from gensim_distw2v.shard import Shard

    shard = Shard({"port": 1})
    local = calls.Caller(tables.SHARD, calls.Handlers(tables.SHARD, shard).handle)
    spec = dict(session="s" * 32, index=0, count=1, vocab_size=50, vector_size=4, weights=["syn0", "syn1neg"],
                merge="sum", merge_dtype="float32", damp_rows={"syn0": 0, "syn1neg": 0}, hot_rows=0,
                versions=versions(), token="tok", max_delta=1.0, owner="own")
    spec.update(spec_fields)
    grant(shard, spec["session"], "own")
    local.send("open_session", spec)
    return shard, local, spec["session"]


def test_a_shard_serves_its_table_with_typed_refusals(grant):
    shard, local, sid = _local_shard(grant)
    rows = np.arange(50 * 4, dtype=np.float32).reshape(50, 4)
    for name in ("syn0", "syn1neg"):
        transfers.send_in_parts(rows, 4 * 4 * 16, lambda lo, part, name=name: local.call(
            "upload", session=sid, name=name, lo=lo, array=part, token="own"))
    with pytest.raises(errors.BadRequest, match="starts at 0, expected 50"):
        local.call("upload", session=sid, name="syn0", lo=0, array=protocol.pack_array(rows[:1]), token="own")
    with pytest.raises(errors.BadRequest, match="is not started yet"):
        local.call("download", session=sid, name="syn0", lo=0, hi=1, rank=0, token="tok")
    with pytest.raises(errors.Forbidden, match="start: not this session's owner secret"):
        local.call("start", session=sid, token="tok")  # a worker's token is not the owner's
    local.call("start", session=sid, token="own")
    with pytest.raises(errors.SessionClosed, match="holds no session 'other'"):
        local.call("start", session="other")
    for token in ({}, {"token": "own"}, {"token": "a guess"}):  # the trained rows: the session's token only
        with pytest.raises(errors.Forbidden, match="download: not this session's token"):
            local.call("download", session=sid, name="syn0", lo=0, hi=1, **token)
    with pytest.raises(errors.BadRequest, match="outside"):
        local.call("download", session=sid, name="syn0", lo=0, hi=51, token="tok")
    with pytest.raises(errors.BadRequest, match="holds no matrix 'syn1'"):
        local.call("download", session=sid, name="syn1", lo=0, hi=1, token="tok")
    got = transfers.fetch_rows(np.zeros((50, 4), np.float32), 100, lambda lo, hi: local.call(
        "download", session=sid, name="syn0", lo=lo, hi=hi, rank=0, token="tok"), "download")
    assert np.array_equal(got, rows)
    status = local.call("status")
    assert status.session.id == sid and status.session.workers == 1 and status.session.started

    def part(value, rank=0, token="tok"):
        return protocol.MergePart(session=sid, rank=rank, lo=0, hi=50, hold_back=0.0, hot_rows=-1, exact=True,
                                  token=token, matrices={"syn0": protocol.pack_deltas(
                                      np.array([1, 3], np.uint32), np.full((2, 4), value, np.float32))})
    with pytest.raises(errors.Forbidden):
        local.call("merge", part(0.5, token="a guess"))
    reply = local.call("merge", part(0.5))
    assert isinstance(reply, protocol.MergeReply)
    assert shard.held.arrays["syn0"][1, 0] == rows[1, 0] + 0.5
    with pytest.raises(errors.Poisoned, match="bound of 1"):  # beyond max_delta: refused, the rank barred
        local.call("merge", part(5.0))
    with pytest.raises(errors.Poisoned, match="worker rank 0 is refused in session"):
        local.call("merge", part(0.1))
    assert shard.held.poisoned.keys() == {0}
    with pytest.raises(errors.BadRequest, match="merge part: hold_back must be in"):
        local.send("merge", {**part(0.1).to_wire(), "hold_back": 2.0})
    for wanted in (protocol.pack_array(np.array([3], np.uint32)), protocol.pack_array(np.zeros(1, np.uint8))):
        # a range far past the shard's rows is refused before anything is sized by it (a mask of 2**62 rows)
        with pytest.raises(errors.BadRequest, match=r"is outside \[0, 50\)"):
            local.send("merge", {**part(0.1, rank=1).to_wire(), "hi": 2 ** 62, "wanted": wanted})
    for guess in ("a guess", "tok"):
        with pytest.raises(errors.Forbidden):
            local.call("close", session=sid, token=guess)
    local.call("close", session=sid, token="own")
    assert local.call("status").session is None
    local.call("close", session=sid, token="any")  # a session not held: no error


def test_a_shard_that_cannot_hold_a_session_says_it_is_full(grant):
    with pytest.raises(errors.Full, match="start more shards"):
        _local_shard(grant, vocab_size=10 ** 9, vector_size=1000)


def test_a_shard_opens_a_session_for_its_owner_only_restoring_from_its_own_checkpoints(grant, tmp_path,
                                                                                       monkeypatch):
    """Issue 38, item 1: a member holding the key (it has the session's id and the workers' token)
    cannot open the session on a shard, nor have it restore rows from another folder; rows beyond
    the session's bound are refused on restore."""
    from gensim_distw2v.io.store import shard_store
    from gensim_distw2v.shard import Shard, service

    monkeypatch.setattr(constants, "GRANT_WAIT", 0.2)
    shard = Shard({"port": 1})
    local = calls.Caller(tables.SHARD, calls.Handlers(tables.SHARD, shard).handle)
    sid, run = "s" * 32, "r" * 32
    spec = dict(session=sid, index=0, count=1, vocab_size=50, vector_size=4, weights=["syn0", "syn1neg"],
                merge="sum", merge_dtype="float32", damp_rows={"syn0": 0, "syn1neg": 0}, hot_rows=0,
                versions=versions(), token="tok", max_delta=1.0, owner="own")
    with pytest.raises(errors.SessionClosed, match=f"the dispatcher runs no session '{sid}'"):
        local.send("open_session", spec)
    folder, other = str(tmp_path / "run"), str(tmp_path / "another-run")
    grant(shard, sid, "own", checkpoint_dir=folder, run=run)
    with pytest.raises(errors.Forbidden, match="open_session: not this session's owner secret"):
        local.send("open_session", dict(spec, owner="tok"))  # the workers' token
    rows = {"syn0": np.ones((50, 4), np.float32), "syn1neg": np.zeros((50, 4), np.float32)}
    about = {"run": run, "session": sid, "index": 0, "count": 1, "vocab_size": 50, "vector_size": 4}
    for where in (folder, other):
        shard_store(where, 0, 1).write(about, rows, sequence=1)
    shard_store(folder, 0, 1).write(about, dict(rows, syn1neg=np.full((50, 4), 1e6, np.float32)), sequence=2)
    with pytest.raises(errors.Forbidden, match="may restore rows from its own checkpoints only"):
        local.send("open_session", dict(spec, restore={"dir": other, "sequence": 1, "count": 1, "run": run}))
    with pytest.raises(errors.RestoreFailed, match="syn1neg holds weights that are not finite or larger than 100"):
        local.send("open_session", dict(spec, restore={"dir": folder, "sequence": 2, "count": 1, "run": run}))
    assert shard.held is None
    local.send("open_session", dict(spec, restore={"dir": folder, "sequence": 1, "count": 1, "run": run}))
    assert shard.held.arrays["syn0"].sum() == 200
