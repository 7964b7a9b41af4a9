"""``gensim_distw2v.Word2Vec``: a drop-in for gensim's, saving plain gensim models."""
import inspect
import os
import subprocess
import sys

import gensim.models
import numpy as np
import pytest

import gensim_distw2v
from gensim_distw2v import Word2Vec
from gensim_distw2v.core import schedule

PARAMS = dict(vector_size=16, min_count=2, seed=5, epochs=2, workers=1, sg=1, negative=5)


@pytest.mark.unit
def test_is_a_gensim_word2vec():
    assert issubclass(Word2Vec, gensim.models.Word2Vec)
    assert gensim_distw2v.__version__


@pytest.mark.unit
def test_accepts_every_gensim_argument(lee_corpus):
    gensim_params = inspect.signature(gensim.models.Word2Vec.__init__).parameters
    defaults = {name: p.default for name, p in gensim_params.items() if name != "self"}
    model = Word2Vec(**defaults)  # every argument, by name, with gensim's defaults
    assert model.distributed is False and model.ns_conf == {}
    # and positionally, in gensim's order
    model = Word2Vec(lee_corpus, None, 16, 0.025, 5, 2, None, 1e-3, 5, 1)
    assert model.vector_size == 16 and model.wv.vectors.shape[1] == 16


@pytest.mark.unit
def test_trains_exactly_like_gensim(lee_corpus):
    reference = gensim.models.Word2Vec(lee_corpus, **PARAMS)
    ours = Word2Vec(lee_corpus, distributed=False, **PARAMS)
    assert np.array_equal(reference.wv.vectors, ours.wv.vectors)
    assert np.array_equal(reference.syn1neg, ours.syn1neg)
    counts = []
    for cls in (gensim.models.Word2Vec, Word2Vec):
        model = cls(**PARAMS)
        model.build_vocab(lee_corpus)
        counts.append(model.train(lee_corpus, total_examples=model.corpus_count, epochs=2))
    assert counts[0] == counts[1] and counts[0][1] == 2 * sum(len(s) for s in lee_corpus)


@pytest.mark.cluster
def test_saved_model_is_plain_gensim(lee_corpus, tmp_path):
    ours = Word2Vec(lee_corpus, ns_conf={"host": "127.0.0.1", "hmac_key": "Zq9-k3y-never-on-disk"}, **PARAMS)
    path = str(tmp_path / "ours.model")
    ours.save(path)
    assert isinstance(ours, Word2Vec) and ours.ns_conf["hmac_key"] == "Zq9-k3y-never-on-disk", "save must not change the model"
    with open(path, "rb") as fin:
        saved = fin.read()
    assert b"gensim_distw2v" not in saved and b"Zq9-k3y-never-on-disk" not in saved
    # a Python without gensim_distw2v imported (and unable to import it) loads it
    code = (
        "import sys; sys.modules['gensim_distw2v'] = None\n"
        "import gensim.models, numpy as np\n"
        f"m = gensim.models.Word2Vec.load({path!r})\n"
        "assert type(m) is gensim.models.Word2Vec, type(m)\n"
        "print(m.wv.vectors.shape, float(np.abs(m.wv.vectors).sum()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{ours.wv.vectors.shape} {float(np.abs(ours.wv.vectors).sum())}"


@pytest.mark.unit
def test_loads_gensim_models_and_keeps_training(lee_corpus, tmp_path):
    reference = gensim.models.Word2Vec(lee_corpus, **PARAMS)
    path = str(tmp_path / "gensim.model")
    reference.save(path)
    ours = Word2Vec.load(path)
    assert type(ours) is Word2Vec and ours.distributed is False
    assert np.array_equal(ours.wv.vectors, reference.wv.vectors)
    ours.train(lee_corpus, total_examples=ours.corpus_count, epochs=1)
    assert not np.array_equal(ours.wv.vectors, reference.wv.vectors)
    assert gensim.models.Word2Vec.load(path).wv.most_similar("police", topn=1)


BAD_SETTINGS = [
    (dict(merge="median"), "unknown merge rule 'median'; choose one of"),
    (dict(sync_words=0), "sync_words must be a positive int"),
    (dict(sync_words=2.5), "sync_words must be a positive int"),
    (dict(hold_back=1.0), "hold_back must be in \\[0, 1\\)"),
    (dict(cold_every=0), "cold_every must be an int in \\[1, 1000\\]"),
    (dict(cold_output_every=0), "cold_output_every must be an int in \\[1, 1000\\]"),
    (dict(cold_output_every=2.5), "cold_output_every must be an int in \\[1, 1000\\]"),
    (dict(cold_output_down="some"), "cold_output_down must be one of \\('all', 'with_up', 'held'\\)"),
    (dict(damp_output_rows=-1), "damp_output_rows must be an int >= 0"),
    (dict(damp_output_rows=True), "damp_output_rows must be an int >= 0"),
    (dict(merge_dtype="int4"), "merge_dtype must be one of"),
    (dict(cluster_timeout=0), "cluster_timeout must be a positive number of seconds"),
    (dict(tensorboard_dir=5), "tensorboard_dir must be a folder"),
    (dict(tensorboard_dir=__file__), "tensorboard_dir .* exists and is not a folder"),
    (dict(tensorboard_words=-1), "tensorboard_words must be an int in \\[0, 1000000\\]"),
    (dict(tensorboard_quality="yes"), "tensorboard_quality must be True or False"),
    (dict(part_bytes=512), "part_bytes must be an int in \\[1024, 67108864\\], got 512"),
    (dict(checkpoint_every=0), "checkpoint_every must be in \\(0, 10000000\\] seconds, got 0"),
]


@pytest.mark.unit
def test_tensorboard_needs_a_distributed_model(lee_corpus, tmp_path):
    model = Word2Vec(min_count=1, vector_size=4, epochs=1, workers=1, tensorboard_dir=str(tmp_path))
    model.build_vocab(lee_corpus[:20])
    with pytest.raises(ValueError, match="only a distributed model .* writes TensorBoard events"):
        model.train(lee_corpus[:20], total_examples=20, epochs=1)


@pytest.mark.parametrize("kwargs, message", BAD_SETTINGS)
@pytest.mark.unit
def test_bad_distributed_settings_are_refused(kwargs, message, tmp_path):
    """Refused alike by the constructor, by load() and by the model's attributes: one Settings object
    validates them all."""
    with pytest.raises(ValueError, match=message):
        Word2Vec(distributed=True, **kwargs)
    model = Word2Vec([["a", "b", "a"]], min_count=1, vector_size=4, epochs=1, workers=1)
    model.save(str(tmp_path / "m"))
    with pytest.raises(ValueError, match=message):
        Word2Vec.load(str(tmp_path / "m"), distributed=True, **kwargs)
    (name, value), = kwargs.items()
    before = model.settings
    with pytest.raises(ValueError, match=message):
        setattr(model, name, value)
    assert model.settings is before


@pytest.mark.unit
def test_removed_setting_is_named_with_what_to_do(tmp_path):
    """The traffic budget is gone (the schedule bounds the bytes): passing it says so, not gensim's
    "unexpected keyword argument"."""
    with pytest.raises(ValueError, match="bytes_per_word: the traffic budget was removed.*drop the argument"):
        Word2Vec(distributed=True, bytes_per_word=100)
    Word2Vec([["a", "b", "a"]], min_count=1, vector_size=4, epochs=1, workers=1).save(str(tmp_path / "m"))
    with pytest.raises(ValueError, match="bytes_per_word: the traffic budget was removed"):
        Word2Vec.load(str(tmp_path / "m"), bytes_per_word=100)


@pytest.mark.unit
def test_settings_are_one_object_passed_whole():
    from gensim_distw2v.client.training import DistributedTraining
    from gensim_distw2v.config.settings import Settings

    model = Word2Vec(distributed=True, sync_words=5000, merge="sum", cold_every=2)
    assert model.settings == Settings(sync_words=5000, merge="sum", cold_every=2)
    model.hold_back = 0  # an attribute replaces its setting, validated and normalised
    assert model.settings.hold_back == 0.0 and isinstance(model.settings.hold_back, float)
    assert DistributedTraining(model, {}).settings is model.settings
    with pytest.raises(ValueError, match="settings must be a gensim_distw2v.config.settings.Settings"):
        DistributedTraining(model, {}, {"merge": "sum"})


@pytest.mark.unit
def test_session_interval_grows_with_the_corpus(lee_corpus):
    """The client sizes the merge interval from the corpus's words per epoch (given to train(), or
    counted by build_vocab), the floor below 11.9 M words; a given sync_words wins."""
    from gensim_distw2v.client.training import DistributedTraining

    model = Word2Vec(distributed=True, vector_size=8, min_count=2, hs=1, negative=0)
    model.build_vocab(lee_corpus)
    client = DistributedTraining(model, {})
    assert client.setup.config(4, False, 1)[0].settings.sync_words == 2_200  # 60 k words: the floor
    # CBOW at K=4: (8 / 4) ** 1.5 times a 5,400th of the words
    assert client.setup.config(4, False, 1, total_words=54_000_000)[0].settings.sync_words == round(10_000 * 2 ** 1.5)
    model.corpus_total_words = 1_080_000_000
    config = client.setup.config(8, False, 1)[0]
    assert config.settings.sync_words == 200_000
    assert config.hot_rows == schedule.hot_rows(model.wv.expandos["count"], 200_000)  # the tiers follow it
    assert client.setup.config(1, False, 1)[0].settings.sync_words == 1_000_000
    model.sync_words = 3_000
    assert DistributedTraining(model, {}).setup.config(8, False, 1)[0].settings.sync_words == 3_000


@pytest.mark.unit
def test_corpus_file_ranges_follow_a_long_interval(lee_corpus, tmp_path):
    """corpus_file ranges are about batch_words words; with an interval longer than a job (a large
    corpus), about the interval, but at least four per worker and epoch."""
    from gensim_distw2v.client.training import DistributedTraining

    path = tmp_path / "lee.txt"
    path.write_text("\n".join(" ".join(s) for s in lee_corpus) + "\n")
    size = path.stat().st_size
    model = Word2Vec(distributed=True, vector_size=8, min_count=2)
    model.build_vocab(lee_corpus)

    def range_words(sync_words, workers, total_words):
        model.sync_words = sync_words
        spec = DistributedTraining(model, {}).setup.config(workers, False, 1, str(path), total_words)[0].corpus_file
        return round(spec.range_bytes * total_words / size)

    assert range_words(2_200, 2, 10 ** 7) == pytest.approx(10_000, rel=0.01)  # batch_words
    assert range_words(50_000, 2, 10 ** 7) == pytest.approx(50_000, rel=0.01)  # the interval
    assert range_words(50_000, 8, 10 ** 6) == pytest.approx(31_250, rel=0.01)  # four ranges per worker
    assert range_words(50_000, 64, 10 ** 6) == pytest.approx(10_000, rel=0.01)  # never below batch_words


@pytest.mark.unit
def test_gensims_corpus_file_rate_is_asked_of_the_ranges_only_for_a_given_corpus_file(tmp_path, lee_corpus):
    """``corpus_file_rate='gensim'`` divides each epoch's decay by the cluster's trainer threads, and
    only for a ``corpus_file`` the user gave: a LineSentence the workers read (the same spec, built
    for gensim's iterable mode) keeps the linear schedule, as does the default."""
    from gensim_distw2v.client.training import DistributedTraining

    path = tmp_path / "lee.txt"
    path.write_text("\n".join(" ".join(s) for s in lee_corpus) + "\n")
    model = Word2Vec(distributed=True, vector_size=8, min_count=2, corpus_file_rate="gensim")
    model.build_vocab(lee_corpus)

    def rate_threads(given, threads, rate=None):
        training = DistributedTraining(model, {}, model.settings if rate is None else
                                       model.settings.replace(corpus_file_rate=rate))
        training.run.given_file = given
        return training.setup.config(4, False, 1, str(path), 10 ** 6, threads=threads)[0].corpus_file.rate_threads

    assert rate_threads(True, 8) == 8
    assert rate_threads(True, None) == 4  # no thread count: one a worker
    assert rate_threads(False, 8) == 1  # a LineSentence the workers read
    assert rate_threads(True, 8, "linear") == 1
    with pytest.raises(ValueError, match="corpus_file_rate"):
        Word2Vec(distributed=True, corpus_file_rate="hot")


@pytest.mark.unit
def test_a_linesentence_the_workers_read_is_cut_front_to_back_a_corpus_file_a_stretch_a_thread(tmp_path,
                                                                                                lee_corpus):
    """A ``corpus_file`` given to ``train()`` is handed out from as many stretches of it as the
    cluster has trainer threads, as gensim's corpus_file mode reads it; a LineSentence the workers
    read, front to back, as gensim's iterable mode reads it (on an ordered file the stretches cost
    CBOW 0.03 SimLex against gensim's iterable mode: docs/schedule.rst, "Ordered files")."""
    from gensim_distw2v.client.training import DistributedTraining
    from gensim_distw2v.core.session import stream_bounds

    path = tmp_path / "lee.txt"
    path.write_text("\n".join(" ".join(s) for s in lee_corpus) + "\n")
    model = Word2Vec(distributed=True, vector_size=8, min_count=2)
    model.build_vocab(lee_corpus)

    def spec(given, threads):
        training = DistributedTraining(model, {}, model.settings)
        training.run.given_file = given
        return training.setup.config(4, False, 1, str(path), 10 ** 6, threads=threads)[0].corpus_file

    given, read = spec(True, 8), spec(False, 8)
    assert (given.streams, read.streams) == (8, 1)
    ranges = -(-given.size // given.range_bytes)
    assert ranges >= 2 and len(stream_bounds(given)) == min(8, ranges) + 1 and stream_bounds(read) == [0, ranges]

def _run_python(code, cwd):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.cluster
def test_refuses_a_different_gensim(tmp_path):
    out = _run_python("import gensim; gensim.__version__ = '9.9.9'\nfrom gensim_distw2v import Word2Vec", tmp_path)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: gensim_distw2v was built against gensim 4.4.0"), last
    assert "but gensim 9.9.9 is installed" in last and "pip install --force-reinstall" in last


@pytest.mark.cluster
def test_unbuilt_source_tree_says_how_to_build(tmp_path):
    source = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gensim_distw2v")
    fake = tmp_path / "gensim_distw2v"
    fake.mkdir()
    for name in os.listdir(source):
        if name.endswith(".py") and name != "_build_info.py":
            (fake / name).write_text(open(os.path.join(source, name)).read())
    # importing the package is cheap (daemons that never train load no gensim); the model checks the kernel
    out = _run_python("from gensim_distw2v import Word2Vec", tmp_path)
    assert "compiled kernel is missing" in out.stderr and "pip install ." in out.stderr, out.stderr
