"""Checkpoints on disk (issue 20's store): atomic writes, checked reads, corruption and other runs refused."""
import json
import logging
import os

import numpy as np
import pytest

from gensim_distw2v.checkpoint import CheckpointError, CheckpointStore


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
    with caplog.at_level(logging.WARNING, logger="gensim_distw2v.checkpoint"):
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
