"""Checkpoints on disk (issue 20's store): atomic writes, checked reads, corruption and other runs refused."""
import json
import logging
import os
import types

import numpy as np
import pytest

from gensim_distw2v.io.store import CheckpointError, CheckpointStore

pytestmark = pytest.mark.unit


def arrays(seed):
    rng = np.random.default_rng(seed)
    return {"syn0": rng.standard_normal((50, 8)).astype(np.float32), "stale": rng.integers(0, 2 ** 63, (50, 1),
                                                                                        dtype=np.uint64)}


def meta(epoch, **extra):
    return {"epoch": epoch, "words": 1000 * epoch, "vocab_digest": "abc", "alpha": 0.0125, **extra}


def test_written_checkpoints_read_back_whole(tmp_path):
    store = CheckpointStore(tmp_path, "shard-0-of-2")
    assert store.latest() is None
    assert store.write(meta(1), arrays(1)) == 1
    assert store.write(meta(2), arrays(2)) == 2
    sequence, got_meta, got = store.latest(expect={"vocab_digest": "abc"})
    assert sequence == 2 and got_meta == meta(2)
    for name, array in arrays(2).items():
        assert got[name].dtype == array.dtype and np.array_equal(got[name], array)
    assert not [e for e in os.listdir(store.root) if e.startswith(".tmp")]  # nothing half-written left


def test_only_the_last_ones_are_kept_and_leftovers_ignored(tmp_path):
    store = CheckpointStore(tmp_path, "dispatcher", keep=2)
    for epoch in range(1, 5):
        store.write(meta(epoch), arrays(epoch))
    assert store.sequences() == [3, 4]
    os.makedirs(os.path.join(store.root, ".tmp-00000005-999"))  # a writer that crashed mid-write
    assert store.latest()[0] == 4 and store.write(meta(5), {}) == 5


@pytest.mark.parametrize("damage", ["truncate", "flip", "manifest", "missing", "format"])
def test_a_damaged_checkpoint_is_skipped_for_the_previous_one(tmp_path, caplog, damage):
    store = CheckpointStore(tmp_path, "shard-1-of-2")
    store.write(meta(1), arrays(1))
    store.write(meta(2), arrays(2))
    folder = store.path(2)
    npy = os.path.join(folder, "syn0.npy")
    if damage == "truncate":  # a crash after the rename cannot do this, a disk can
        with open(npy, "r+b") as f:
            f.truncate(os.path.getsize(npy) - 7)
    elif damage == "flip":
        with open(npy, "r+b") as f:
            f.seek(-3, os.SEEK_END)
            byte = f.read(1)
            f.seek(-3, os.SEEK_END)
            f.write(bytes([byte[0] ^ 0xFF]))
    elif damage == "manifest":
        with open(os.path.join(folder, "MANIFEST.json"), "w") as f:
            f.write("{not json")
    elif damage == "missing":
        os.remove(npy)
    else:
        with open(os.path.join(folder, "MANIFEST.json")) as f:
            manifest = json.load(f)
        manifest["format"] = 99
        with open(os.path.join(folder, "MANIFEST.json"), "w") as f:
            json.dump(manifest, f)
    with caplog.at_level(logging.WARNING, logger="gensim_distw2v.io.store"):
        sequence, got_meta, got = store.latest()
    assert sequence == 1 and got_meta == meta(1) and np.array_equal(got["syn0"], arrays(1)["syn0"])
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "skipping checkpoint 2 of shard-1-of-2" in warning
    expected = {"truncate": "cut short or altered", "flip": "does not match its digest",
                "manifest": "no readable MANIFEST.json", "missing": "syn0.npy is missing",
                "format": "is not a format-1 manifest"}[damage]
    assert expected in warning, warning
    with pytest.raises(CheckpointError, match=expected):
        store.read(2)


def _forge(folder, fname, entry):
    """Put ``fname`` in a checkpoint's manifest as ``entry`` (the manifest carries no key: anyone who can
    write the folder can rewrite it; docs/security.rst, threat model d)."""
    with open(os.path.join(folder, "MANIFEST.json")) as f:
        manifest = json.load(f)
    manifest["files"][fname] = entry
    with open(os.path.join(folder, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f)


def _entry(path, **extra):
    from gensim_distw2v.io.store import _digest
    return {"size": os.path.getsize(path), "digest": _digest(path), **extra}


@pytest.mark.parametrize("craft", ["name-empty", "name-dot", "name-dotdot", "zip", "meta-json", "symlink", "fifo",
                                   "meta-nested", "manifest-nested", "shape-wraps", "shape-negative", "name-nul"])
def test_a_crafted_checkpoint_is_refused_as_unreadable_and_skipped(tmp_path, caplog, craft):
    """Issue 38, item 6 (and 2's regular files): manifest names "", "." and "..", a .npy that is a zip
    archive, metadata that is not JSON, a symlink and a FIFO; issue 54's nesting deeper than the parser, a
    shape whose element count wraps, negative dimensions and a name with a NUL: each a CheckpointError naming
    it (the folder falls back to the previous checkpoint), never another exception nor a blocked read."""
    store = CheckpointStore(tmp_path, "shard-1-of-2")
    store.write(meta(1), arrays(1))
    store.write(meta(2), arrays(2))
    folder = store.path(2)
    npy = os.path.join(folder, "syn0.npy")
    spec = {"array": {"dtype": "<f4", "shape": [50, 8]}}
    if craft.startswith("name-"):
        name = {"name-empty": "", "name-dot": ".", "name-dotdot": "..", "name-nul": "syn0\0.npy"}[craft]
        _forge(folder, name, {"size": 4096, "digest": "0" * 32, **spec})
        expected = "names a file it may not"
    elif craft == "zip":
        os.remove(npy)
        np.savez(os.path.join(folder, "zipped.npz"), syn0=arrays(2)["syn0"])
        os.rename(os.path.join(folder, "zipped.npz"), npy)
        _forge(folder, "syn0.npy", _entry(npy, **spec))
        expected = "is not a numpy array file"
    elif craft == "meta-json":
        path = os.path.join(folder, "meta.json")
        with open(path, "w") as f:
            f.write("{not json")
        _forge(folder, "meta.json", _entry(path))
        expected = "meta.json is not JSON metadata"
    elif craft == "meta-nested":  # deeper than Python's parser goes: RecursionError, not a ValueError
        path = os.path.join(folder, "meta.json")
        with open(path, "w") as f:
            f.write("[" * 50_000 + "]" * 50_000)
        _forge(folder, "meta.json", _entry(path))
        expected = "meta.json is not JSON metadata \\(RecursionError"
    elif craft == "manifest-nested":  # parsed before its signature could be checked
        with open(os.path.join(folder, "MANIFEST.json")) as f:
            text = f.read()
        with open(os.path.join(folder, "MANIFEST.json"), "w") as f:
            f.write(text.rstrip()[:-1] + ', "x": ' + "[" * 30_000 + "]" * 30_000 + "}")
        expected = "no readable MANIFEST.json \\(RecursionError"
    elif craft == "shape-wraps":  # 2^32 x 2^32 elements: 0 in int64, as many as the empty data holds
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        with open(npy, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        _forge(folder, "syn0.npy", _entry(npy, array={"dtype": "<f4", "shape": [4294967296, 4294967296]}))
        expected = "syn0.npy is not a numpy array file of numbers"
    elif craft == "shape-negative":  # numpy reads (-1, -1); 4 bytes are "one" element of it; reshape refuses it
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, -1), }"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        with open(npy, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 4)
        _forge(folder, "syn0.npy", _entry(npy, array={"dtype": "<f4", "shape": [-1, -1]}))
        expected = "syn0.npy is not a numpy array file of numbers \\(shape \\(-1, -1\\)\\)"
    elif craft == "symlink":
        real = os.path.join(str(tmp_path), "elsewhere.npy")
        os.rename(npy, real)
        os.symlink(real, npy)
        expected = "syn0.npy is not a regular file"
    else:
        os.remove(npy)
        os.mkfifo(npy)
        _forge(folder, "syn0.npy", {"size": 0, "digest": "0" * 32, **spec})
        expected = "syn0.npy is not a regular file"
    with pytest.raises(CheckpointError, match=expected):
        store.read(2)
    with caplog.at_level(logging.WARNING, logger="gensim_distw2v.io.store"):
        assert store.latest()[0] == 1


def test_a_checkpoint_of_another_run_is_refused_by_name(tmp_path):
    store = CheckpointStore(tmp_path, "dispatcher")
    store.write(meta(1), {})
    with pytest.raises(CheckpointError, match=r"is of another run: its vocab_digest is 'abc', this run's is "
                                              r"'xyz' \(give an empty checkpoint folder"):
        store.latest(expect={"vocab_digest": "xyz"})


def test_arrays_that_would_need_pickle_or_unsafe_names_are_refused(tmp_path):
    store = CheckpointStore(tmp_path, "dispatcher")
    with pytest.raises(ValueError, match="must be a numpy array of numbers"):
        store.write(meta(1), {"words": np.array(["a", None], dtype=object)})
    with pytest.raises(ValueError, match="not a safe file name"):
        store.write(meta(1), {"../evil": np.zeros(3)})
    with pytest.raises(ValueError, match="letters, digits"):
        CheckpointStore(tmp_path, "../up")
    with pytest.raises(ValueError, match="keep must be an int >= 2"):
        CheckpointStore(tmp_path, "x", keep=1)
    with pytest.raises(ValueError):  # NaN is not JSON
        store.write({"loss": float("nan")}, {})
    assert store.sequences() == []  # nothing written by the refused calls


# ---------------------------------------------------------------------------------------------- issue 38, item 3
def _modes(folder):
    """``{path: mode}`` of every file and folder under ``folder`` (itself included)."""
    out = {folder: os.stat(folder).st_mode & 0o777}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            out[os.path.join(root, name)] = os.lstat(os.path.join(root, name)).st_mode & 0o777
    return out


def test_checkpoints_are_private_whatever_the_umask(tmp_path):
    """Under umask 022 the folders were 0755 and the files 0644: every user of the node read the
    weights. Now folders 0700, files 0600."""
    old = os.umask(0o022)
    try:
        folder = str(tmp_path / "new")
        store = CheckpointStore(folder, "shard-0-of-1", keep=None)
        for sequence in (1, 2):
            store.write(meta(sequence), arrays(sequence), sequence=sequence)
        modes = _modes(folder)
        assert len(modes) == 1 + 1 + 2 + 2 * 4  # the folder, the store's, 2 checkpoints of 4 files
        assert {path: mode for path, mode in modes.items() if mode & 0o077} == {}
        # an older store's folder (0755) is made private when it is used again
        os.chmod(store.root, 0o755)
        CheckpointStore(folder, "shard-0-of-1", keep=None)
        assert os.stat(store.root).st_mode & 0o777 == 0o700
    finally:
        os.umask(old)


@pytest.mark.parametrize("who", ["another user", "others", "its group"])
def test_a_checkpoint_folder_someone_else_can_write_is_refused(tmp_path, who):
    folder = tmp_path / "shared"
    folder.mkdir()
    if who == "another user":
        os.chown(folder, 65534, 65534)
        expected = r"belongs to another user \(uid 65534\): whoever owns it can read or swap"
    else:
        os.chmod(folder, 0o777 if who == "others" else 0o770)
        expected = rf"is writable by {who} \(d[rwx-]+\): they could swap what is written there; chmod go-w"
    with pytest.raises(CheckpointError, match=expected):
        CheckpointStore(str(folder), "dispatcher")
    assert list(folder.iterdir()) == []


def test_no_file_is_written_through_a_planted_symlink(tmp_path):
    from gensim_distw2v.io.store import _write_file

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, tmp_path / "planted")
    with pytest.raises(FileExistsError):
        _write_file(str(tmp_path / "planted"), lambda fout: fout.write(b"overwritten"))
    assert victim.read_bytes() == b"precious"
    store = CheckpointStore(str(tmp_path / "ck"), "dispatcher")
    planted = os.path.join(store.root, f".tmp-00000001-{os.getpid()}-")  # a guess at the temporary folder's name
    os.symlink(str(tmp_path), planted)
    store.write(meta(1), {})
    assert os.path.islink(planted) and not os.path.exists(tmp_path / "meta.json")  # written elsewhere, safely


def test_a_signed_checkpoint_is_refused_once_swapped_or_unsigned(tmp_path):
    """With the cluster's key the manifest is signed: whoever can write the folder (threat model d)
    can no longer swap a whole checkpoint for one of their own, digests and all."""
    import shutil

    key, folder = b"the cluster's key", str(tmp_path / "ck")
    signed = CheckpointStore(folder, "dispatcher", key=key)
    signed.write(meta(1), arrays(1))
    assert signed.read(1)[0] == meta(1)
    forger = CheckpointStore(str(tmp_path / "forged"), "dispatcher")  # the same layout, no key
    forger.write(meta(1, words=666), arrays(9), sequence=1)
    shutil.rmtree(signed.path(1))
    shutil.copytree(forger.path(1), signed.path(1))
    with pytest.raises(CheckpointError, match="is not signed with this cluster's key \\(it carries no signature"):
        signed.read(1)
    CheckpointStore(str(tmp_path / "forged"), "dispatcher", key=b"another key").write(meta(2), {}, sequence=2)
    with pytest.raises(CheckpointError, match="a wrong signature"):
        CheckpointStore(str(tmp_path / "forged"), "dispatcher", key=key).read(2)
    assert signed.latest() is None  # nothing usable: the forged one is skipped


def test_reads_are_bounded_in_size_and_time_before_a_byte_is_digested(tmp_path):
    store = CheckpointStore(str(tmp_path), "dispatcher")
    store.write(meta(1), arrays(1))
    huge = os.path.join(store.path(1), "syn0.npy")
    os.truncate(huge, 1 << 40)  # a sparse terabyte: digesting it would take hours
    _forge(store.path(1), "syn0.npy", {"size": 1 << 40, "digest": "0" * 32,
                                       "array": {"dtype": "<f4", "shape": [50, 8]}})
    with pytest.raises(CheckpointError, match=r"lists files of .* more than a checkpoint of this kind holds"):
        store.read(1, max_bytes=1 << 20)
    import time

    began = time.monotonic()
    with pytest.raises(CheckpointError, match="past the deadline"):
        store.read(1, deadline=time.monotonic() + 0.2)
    assert time.monotonic() - began < 5.0
    _forge(store.path(1), "meta.json", {"size": 1 << 30, "digest": "0" * 32})
    with pytest.raises(CheckpointError, match="1048576 of meta.json"):
        store.read(1)


def test_a_resume_point_beyond_its_bounds_is_refused():
    """``done_below=10**12`` used to expand into a list of 10**12 job ids under the dispatcher's lock."""
    from gensim_distw2v import protocol

    good = dict(checkpoint=1, epoch=0, first_job=0, done_below=10, done_jobs=[12], crc=0, epochs={}, loss=0.0,
                head=[])
    protocol.Resumed.from_wire(good)
    for bad in (dict(done_below=10 ** 12), dict(first_job=5, done_below=4), dict(epoch=10 ** 7),
                dict(done_jobs=[2 ** 60])):
        with pytest.raises(ValueError, match="resume point"):
            protocol.Resumed.from_wire({**good, **bad})


def _store(tmp_path):
    return CheckpointStore(str(tmp_path), "dispatcher", keep=2)


def spec(tmp_path, every=10.0, **kwargs):
    from gensim_distw2v import protocol

    return protocol.CheckpointSpec(dir=str(tmp_path), every=every, identity={"vocabulary": "v1"}, **kwargs)


def point(epoch=0):
    from gensim_distw2v import protocol

    return protocol.Resumed(checkpoint=0, epoch=epoch, first_job=0, done_below=0, done_jobs=[], crc=0, epochs={},
                        loss=0.0)


def test_a_cluster_checkpoint_commits_once_every_shard_wrote_it(tmp_path):
    from gensim_distw2v import protocol
    from gensim_distw2v.core.checkpoints import SessionCheckpoints

    plan = SessionCheckpoints(spec(tmp_path), "run1", shards=2, now=0.0, store=_store(tmp_path), mark=(-1, 0))
    assert not plan.due(5.0, (-1, 3)) and plan.due(10.0, (-1, 3)) and plan.order(0) is None
    assert not plan.due(10.0, (-1, 0))  # nothing trained since the start: a timed one would repeat it
    assert plan.ask() == 1 and plan.due(5.0, (-1, 0))  # asked for (an epoch end): due at once
    assert plan.begin(point(), False, 10.0, (-1, 3)) == 1 and not plan.due(100.0, (-1, 9))
    order = plan.order(1)
    assert (order.sequence, order.run, order.keep_from, order.dir) == (1, "run1", 1, str(tmp_path))
    assert plan.ask() == 2  # an epoch end while checkpoint 1 is in progress: 2 starts after it
    assert plan.report(0, protocol.ShardCheckpoint(sequence=1, stage="taken"), 10.1) is None
    assert plan.order(0) is None and plan.state.taken == 0
    assert plan.report(1, protocol.ShardCheckpoint(sequence=1, stage="written", bytes=100), 10.2) is None
    assert plan.state.taken == 1  # every shard copied its rows
    assert plan.report(0, protocol.ShardCheckpoint(sequence=0, stage="written"), 10.3) is None  # not this one: ignored
    assert plan.report(0, protocol.ShardCheckpoint(sequence=1, stage="written", bytes=50), 10.3) == "commit"
    sequence, record = plan.record({"vocabulary": "v1"})
    assert sequence == 1 and record["run"] == "run1" and record["shards"] == 2 and not record["finished"]
    plan.store.write(record, {}, sequence=sequence)
    plan.committed(1, 10, 12.0)
    assert (plan.state.committed, plan.state.count, plan.state.bytes) == (1, 1, 160)
    # the one asked for is due at once; a timed one not before 49 times the last one's 2 s
    assert plan.due(12.0, (0, 9)) and plan.begin(point(1), True, 12.0, (0, 9)) == 2
    assert plan.order(0).keep_from == 1  # checkpoint 1 stays until 2 is committed
    plan.fail("shard 1 could not write checkpoint 2: disk full", 13.0)
    assert plan.state.error.endswith("disk full") and plan.state.taken == plan.state.failed == 2
    assert plan.state.committed == 1
    assert not plan.due(13.0 + 97.0, (0, 9)) and plan.due(13.0 + 98.0, (0, 9))  # the failed one is retried
    # once committed, an idle session (its client dead, say) writes no more timed checkpoints
    assert plan.begin(point(1), True, 200.0, (0, 9)) == 3
    plan.committed(3, 10, 201.0)
    assert not plan.due(1e6, (0, 9)) and plan.due(1e6, (0, 10)) and plan.due(1e6, (1, 9))


def test_skipped_jobs_must_be_the_ones_the_checkpoint_trained():
    import zlib

    from gensim_distw2v.client.training import SkippedJobs
    from gensim_distw2v.core.jobs import Job

    jobs = [Job(np.arange(i, i + 5, dtype=np.uint32), np.array([0, 5]), 0.02, 5, 1) for i in range(6)]
    crc = sum(zlib.crc32(jobs[i].indices) for i in (0, 1, 3))
    resumed = point()
    resumed.done_below, resumed.done_jobs, resumed.crc = 2, [3], crc
    skipped = SkippedJobs(resumed)
    assert [skipped.skips(i, job) for i, job in enumerate(jobs)] == [True, True, False, True, False, False]
    other = SkippedJobs(resumed)
    with pytest.raises(ValueError, match="not the one checkpoint 0 was trained on: the 3 jobs it trained of epoch 0 "
                                         "hold other words here"):
        for i, job in enumerate(jobs[1:] + jobs[:1]):
            other.skips(i, job)
    resumed.head = [zlib.crc32(jobs[0].indices), zlib.crc32(jobs[1].indices)]  # every epoch's first jobs
    assert SkippedJobs(resumed).skips(0, jobs[0])
    with pytest.raises(ValueError, match="job 1 of an epoch holds other words here"):
        SkippedJobs(resumed).skips(1, jobs[2])
    short = SkippedJobs(resumed)
    short.skips(0, jobs[0])
    with pytest.raises(ValueError, match="the 3 jobs it trained of epoch 0 are 1 here"):
        short.finish()


def test_checkpoint_messages_are_checked_on_arrival():
    from gensim_distw2v import protocol

    good = {"dir": "/data/run", "every": 300.0, "identity": {"vocabulary": "v"}}
    assert protocol.CheckpointSpec.from_wire(good).resume is False
    for bad, message in [({"dir": "run"}, "dir must be an absolute path"),
                         ({"every": 0.0}, r"every must be in \(0, 1e7\]"),
                         ({"identity": {"x": b"bytes"}}, "bytes is not plain data"),
                         ({"identity": {"x": float("nan")}}, "float is not plain data"),
                         ({"below": 0}, "below must be >= 1")]:
        with pytest.raises(ValueError, match=message):
            protocol.CheckpointSpec.from_wire({**good, **bad})
    with pytest.raises(ValueError, match="stage must be one of"):
        protocol.ShardCheckpoint.from_wire({"sequence": 1, "stage": "done"})
    with pytest.raises(ValueError, match=r"keep_from in \[1, sequence\]"):
        protocol.CheckpointOrder.from_wire({"sequence": 2, "dir": "/d", "run": "r", "keep_from": 3})
    with pytest.raises(ValueError, match="done_jobs must be job ids"):
        protocol.Resumed.from_wire({**point().to_wire(), "done_jobs": [-1]})
    with pytest.raises(ValueError, match=r"count in \[1, 4096\]"):
        protocol.RestoreSpec.from_wire({"dir": "/d", "sequence": 1, "count": 0, "run": "r"})


def test_an_epoch_end_reuses_a_checkpoint_ordered_at_it_and_a_resumed_run_keeps_its_rows(tmp_path):
    from gensim_distw2v.core.checkpoints import CHECKPOINT_DEADLINE
    from gensim_distw2v.core.checkpoints import SessionCheckpoints

    CheckpointStore(tmp_path, "dispatcher").write({"finished": False}, {}, sequence=2)  # damaged, say
    plan = SessionCheckpoints(spec(tmp_path), "run1", shards=1, now=0.0, store=_store(tmp_path), committed=1)  # resumed from 1
    assert plan.begin(point(epoch=1), False, 10.0) == 3
    assert plan.order(0).keep_from == 1  # the rows of checkpoint 1 stay until 3 is committed
    assert plan.ask(completed=0) == 3  # ordered after epoch 0, before any job of epoch 1: that epoch end's
    assert plan.ask(completed=1) == 4 and plan.wanted == 4
    assert not plan.expired(10.0 + CHECKPOINT_DEADLINE) and plan.expired(10.1 + CHECKPOINT_DEADLINE)


def test_a_session_a_shard_would_not_open_is_opened_again_then_given_up(monkeypatch):
    """A shard that had not heard of the new session from the dispatcher (their heartbeat frozen or cut) refuses
    to open it: nothing was trained in it, so the run opens a session again, checkpoints or not, up to
    ``MAX_REOPENS`` times, with the same resume point; then the shard's refusal is raised."""
    from gensim_distw2v.client import checkpoints
    from gensim_distw2v.protocol import errors
    from gensim_distw2v.config.settings import Settings

    monkeypatch.setattr(checkpoints, "REOPEN_WAIT", 0.0)

    class Sessions:
        def __init__(self, refusals):
            self.refusals, self.calls = refusals, []

        def __call__(self, resume, below):
            self.calls.append((resume, below))
            if len(self.calls) <= self.refusals:
                raise checkpoints._NotOpened("shard s0 did not hear of the new session",
                                             errors.SessionClosed("open_session: the dispatcher runs no session"))
            return 10, 12

    def resumes():
        return checkpoints.Resumes(types.SimpleNamespace(settings=Settings(), started=lambda: None, begun=set()),
                                   check_workers=None)

    sessions = Sessions(2)
    assert resumes().train(sessions, None) == (10, 12) and sessions.calls == [(False, None)] * 3
    sessions = Sessions(checkpoints.MAX_REOPENS + 1)
    with pytest.raises(errors.SessionClosed, match="the dispatcher runs no session"):
        resumes().train(sessions, None)
    assert len(sessions.calls) == checkpoints.MAX_REOPENS + 1
