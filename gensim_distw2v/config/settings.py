"""The distributed settings of a model: one validated object, built once and passed whole.

:class:`Settings` holds what ``Word2Vec(distributed=True, ...)`` takes beyond gensim's arguments.
Each setting is declared once, as a field of it: its default, a one-line help and its check
(:mod:`gensim_distw2v.config.fields`). ``Word2Vec``'s keywords, attributes and docstring, the command
line's options (``python -m gensim_distw2v train --sync-words ...``) and the docs' table are
generated from the fields. It is validated where it is built (a bad value raises a ``ValueError``
naming the setting, what it is, what is allowed and the value), and then passed whole: from the
model to the client, whose session config carries it to the dispatcher, the shards and the workers.
"""
import dataclasses
import typing

import numpy as np

from gensim_distw2v.config import fields
from gensim_distw2v.config.choices import (COLD_OUTPUT_DOWN, CORPUS_FILE_RATES, DELTA_DTYPES, MAX_ARRAY_BYTES,
                                              MERGE_RULES, SYNC_MODES)

__all__ = ["CHECKPOINT_EVERY", "COLD_EVERY", "HOLD_BACK", "MERGE_DTYPE", "PART_BYTES", "LAG_LIMIT", "ROUND_PIECES", "ROUNDS_IN_FLIGHT", "TENSORBOARD_WORDS",
           "Settings", "check_codec", "check_cold_every"]

PART_BYTES = 16 * 1024 * 1024  # arrays and merge rounds move in parts of at most this many bytes
CHECKPOINT_EVERY = 300.0  # seconds between timed checkpoints (with checkpoint_dir)
TENSORBOARD_WORDS = 10_000  # the embedding projector's most frequent words (with tensorboard_dir)
# Routine merges' values on the wire, by default: int8 levels with a float32 scale per row (d + 8
# bytes a row of d values with its index; float16: 2 d + 4, on request). With hot rows every round
# and error feedback, int8 holds quality at K = 2 to 8 (docs/schedule.rst). What rounding loses waits
# for the next round, as held-back rows do.
MERGE_DTYPE = "int8"
# The rows of rare words merge every COLD_EVERY-th round (docs/schedule.rst)
COLD_EVERY = 6
# Up, a routine round holds back the rows that changed least, together HOLD_BACK of the squared change
# (error feedback: they go once grown, or at the epoch's exact flush); down, the hot rows' deltas alike.
# Measured at K=8 (CBOW, seeds 1-2, docs/schedule.rst): 0.1 -> 0.3 cuts the bytes up from 144 to 110
# per word for about 0.1 analogy points; 0.5 (87 B) cost 0.3 more.
HOLD_BACK = 0.3
# A routine merge round goes in at least ROUND_PIECES pieces of rows, each taken while the one before is
# on the wire and on the shards (core.schedule.round_pieces). One by default: on this 2-core machine four
# pieces cost the shards' routine calls 52-95% more CPU and the workers' rounds 12-40% more at 0.3 M rows
# (K=2 and 4), trained 7-10% slower and took no less time a round through a 1 Gbit/s link
# (docs/scaling.rst, "Pieces in flight"); a node with cores to spare may gain (measure it there)
ROUND_PIECES = 1
# A worker's routine rounds in flight at once: with 2, the next round is taken while the last one's replies
# are still on their way (they are taken in as soon as they come, or after the next round is taken, with
# that round's own rows added back), so a round's wire and the shards' folds overlap the merge thread's
# work: 18-20% faster through 4-7 ms round trips on this machine, the same quality at K=2 and 8 (skip-gram
# and CBOW, devmix's first 5 M words, 3 epochs, seeds 1-2; docs/scaling.rst, "Rounds in flight")
ROUNDS_IN_FLIGHT = 2
# A worker's interval plus its rounds' lag (the words it trains between taking a round and taking that round's
# replies in) is kept within this many intervals (sync_words), the interval shortened as the lag grows: through a
# real cluster (40 M tokens of discourse text, CBOW, one epoch), eight workers at 1.65 times their interval
# (7,407 words and a lag of 4,809) and sixteen at 1.61 (2,200 and 3,779) held gensim's quality; sixteen at 2.49
# times theirs (3,704 and 5,501, rounds in flight) lost 4.8-6.5 analogy points, at 1.83 (one round at a time)
# 0.6-1.3 (docs/schedule.rst, "The lag")
LAG_LIMIT = 1.65


def check_codec(codec):
    """``codec`` (a name or numpy dtype of :data:`DELTA_DTYPES`) as its name; a clear error otherwise."""
    return Settings.check("merge_dtype", codec)


def check_cold_every(cold_every, what=None):
    """``cold_every`` (merge the rows of rare words every n-th round) as an int in [1, 1000];
    ValueError naming the problem otherwise."""
    try:
        return Settings.check("cold_every", cold_every)
    except ValueError as err:
        raise ValueError(f"{what}: {err}" if what else str(err)) from None


def _dtype_name(codec):
    return np.dtype(codec).name


@dataclasses.dataclass(frozen=True)
class Settings(fields.Declared):
    """How a model trains on a cluster: what ``Word2Vec(distributed=True, ...)`` takes beyond gensim's
    arguments (each is a keyword and an attribute of :class:`gensim_distw2v.Word2Vec` too).

    Parameters
    ----------
    <fields>
    """

    sync_words: typing.Optional[int] = fields.option(
        None, "words each worker trains between merges (None: derived from the corpus)", fields.Count(1, optional=True),
        doc="None, the default: a 5,400th of the corpus's words per epoch at eight workers (skip-gram half "
            "that), (8 / K) ** 2 of that with more, longer with fewer; at least 2,200 and at most 1 M; 1 M with one worker "
            "(:func:`gensim_distw2v.core.schedule.default_sync_words`, ``docs/schedule.rst``). Shorter costs more "
            "rounds and bytes per word; longer costs quality.", group="merging")
    merge: str = fields.option(
        "damp", "the merge rule: how the parameter shards merge the workers' updates",
        fields.Choice(MERGE_RULES, noun="merge rule"),
        doc="``'sum'`` applies every delta (a parameter server); ``'damp'`` counts updates that workers made alike "
            "once (input vectors, and the most frequent output vectors); ``'mean'`` is plain model averaging, "
            "which trains like 1/K of the data (:mod:`gensim_distw2v.core.merge`, ``docs/merge_rule.rst``).",
        group="merging")
    sync: str = fields.option(
        "ssp", "how merge rounds are ordered: ssp bounded staleness, bsp a barrier per round (reproducible), asp no "
               "bound, local merges at epoch ends only", fields.Choice(SYNC_MODES, noun="sync mode"),
        doc="``'ssp'``: a worker trains on while its round is in flight, at most one interval ahead. ``'bsp'``: "
            "jobs are dealt to the workers in a fixed way and rounds are taken in turn (by epoch, round, worker "
            "rank), each taken in before its worker trains on: a model trained twice with the same seed and the "
            "same number of workers (of one thread each, as gensim needs ``workers=1``) is bit-identical. "
            "``'asp'``: no bound at all. ``'local'``: no merges within an epoch, the replicas are merged at epoch "
            "ends. Measured in ``docs/schedule.rst``.", group="merging")
    hold_back: float = fields.option(
        HOLD_BACK, "share of its squared change (the rows that changed least) a worker may keep back in a routine "
                   "merge, to send once grown (0: every changed row goes)",
        fields.Real(0.0, 1.0, high_open=True), doc="Epoch ends always merge everything.", group="merging")
    cold_every: int = fields.option(
        COLD_EVERY, "the rows of rare words merge every n-th round, and at epoch ends (1: every row in every round)",
        fields.Count(1, 1000),
        doc="Rare words: beyond the hot rows, those a worker sees less than a quarter of a time per merge interval "
            "(:func:`gensim_distw2v.core.schedule.hot_rows`). Their change waits meanwhile, as held-back rows do; "
            "routine rounds read and move only the frequent words' rows.", group="merging")
    cold_output_every: typing.Optional[int] = fields.option(
        None, "of the rounds that merge the rare words' rows, every n-th also sends the changes of syn1neg's rare "
              "rows (None: derived from the model)", fields.Count(1, 1000, optional=True),
        doc="None, the default: every 4th for CBOW (every 24th round), every one for skip-gram "
            "(:func:`gensim_distw2v.core.schedule.default_cold_output_every`, ``docs/scaling.rst``, \"Rare output "
            "rows\"). A worker's change to the output rows of rare words (syn1neg beyond the hot rows, which every "
            "worker's negatives push) waits in ``R - B`` meanwhile, as held-back rows do; their current values "
            "still come down in every round that merges rare rows, and epoch ends send every row.",
        group="merging")
    cold_output_down: typing.Optional[str] = fields.option(
        None, "which rare rows of syn1neg a round that merges the rare rows brings down: 'all' a worker lacks, "
              "'with_up' (all, in the rounds that also send syn1neg's rare rows up; else those of its jobs), or "
              "'held', those of its jobs (None: derived from the model)",
        fields.Choice(COLD_OUTPUT_DOWN, optional=True),
        doc="None, the default: ``'all'`` for skip-gram, ``'with_up'`` for CBOW (``'held'`` until 2026-12-01) "
            "(:func:`gensim_distw2v.core.schedule.default_cold_output_down`, ``docs/schedule.rst``, \"Skip-gram's "
            "negatives\" and \"CBOW's negatives on ordered text\"). The negatives a worker draws come from every "
            "word; with ``'held'`` a rare word's output row comes down to it only when the word is in a job it holds "
            "(and at epoch ends), so the negatives it draws meanwhile are those rows as it left them, for up to an "
            "epoch. ``'with_up'`` brings them all in the rounds that send the worker's own changes to them "
            "(every ``cold_output_every``-th round that merges rare rows; with skip-gram's every one it is "
            "``'all'``). The input rows (syn0) of rare words come down as the jobs want them either way. "
            "CBOW on text that comes in documents (a drifting discourse, as articles come) trained better with "
            "``'held'`` at K=8 (0.08 on a known truth list, 2026-12-03), on text grouped by topic worse "
            "(ws353 -0.03): ``docs/schedule.rst``, \"CBOW's rare output rows down with their changes cost the "
            "discourse text\".",
        group="merging")
    damp_output_rows: typing.Optional[int] = fields.option(
        None, "at most this many of syn1neg's most frequent rows are damped by the 'damp' rule (None: the "
              "package's cap, 1,000; 0: no output row)", fields.Count(0, optional=True),
        doc="Under ``merge='damp'``: the input rows a worker sees several times per damp clock are damped "
            "(:func:`gensim_distw2v.core.schedule.damped_rows`), the output rows as many of them but at most this "
            "many. CBOW on text in documents (a drifting discourse) trained better with none at K=8 (0.033 on a "
            "known truth list, means of four seeds, 2026-12-03), text grouped by topic a little worse (SimLex "
            "-0.013, two seeds): ``docs/schedule.rst``, \"Four seeds, the Debian file and the lag\".",
        group="merging")
    merge_dtype: str = fields.option(
        MERGE_DTYPE, "values of routine merges on the wire, both ways (deltas, and rows a worker lacks)",
        fields.Choice(DELTA_DTYPES, normalise=_dtype_name),
        doc="``'int8'``: levels with a float32 scale per row, about half the bytes of ``'float16'``; ``'float32'`` "
            "exactly. What rounding loses goes with a later round (error feedback); epoch ends are exact.",
        group="merging")
    cluster_timeout: float = fields.option(
        30.0, "seconds to wait for a first worker and shard, for a worker when none is left, and (with "
              "checkpoint_dir) for a lost dispatcher or shard to be restarted",
        fields.Real(0.0, low_open=True, unit="seconds"), doc="Then ``train()`` raises.", group="cluster")
    workers_read: bool = fields.option(
        True, "the workers read a LineSentence's file themselves, in byte ranges as with corpus_file, when every "
              "worker sees it at the same path (False: the client streams it as any iterable)", fields.Flag(),
        doc="A ``LineSentence`` of a plain-text file (not compressed, no ``limit``, gensim's ``max_sentence_length``) "
            "trains the same words with the same learning rates either way, without passing through the client "
            "(``docs/corpus_file.rst``); if a worker does not see the file, the client streams it. False keeps "
            "gensim's job cuts: with one worker of one thread, the model bit-exact with gensim's.", group="cluster")
    corpus_file_rate: str = fields.option(
        "linear", "how a corpus_file run's learning rate decays: 'linear' over the whole run, as gensim's iterable "
                  "mode, or 'gensim', as gensim's corpus_file mode with as many threads as the cluster's trainers",
        fields.Choice(CORPUS_FILE_RATES),
        doc="gensim's ``corpus_file`` mode with W threads decays each epoch's rate only 1/W of the way (each thread "
            "counts its own words against the whole corpus's), so its rate runs hotter the more threads it has, "
            "and with one epoch never anneals. ``'gensim'`` copies that, with W the cluster's trainer threads, for "
            "a run that should train as gensim's ``corpus_file`` run of as many threads (``docs/corpus_file.rst``, "
            "\"gensim's corpus_file rate\"); a ``LineSentence`` the workers read keeps gensim's iterable schedule "
            "either way.", group="cluster")
    part_bytes: int = fields.option(
        PART_BYTES, "arrays and merge rounds move in messages of at most this many bytes",
        fields.Count(1024, MAX_ARRAY_BYTES // 2), doc="Tests shrink it; there is no other reason to change it.",
        group="merging")
    round_pieces: int = fields.option(
        ROUND_PIECES, "a routine merge round goes in at least this many pieces of rows, each taken while the one "
                      "before is on its way (1: one message to each shard a round)", fields.Count(1, 64),
        doc="A piece's rows are others than the piece's before, so the order does not matter; each shard has one "
            "piece in flight at a time, and folds pieces of different workers at once. A round may then take "
            "about its CPU and the last piece's time on the wire and the shards, rather than their sum, for a "
            "message more to each shard a piece; where cores are busy (the 2-core machine of the measurements) "
            "the messages cost more than the overlap gains (``docs/scaling.rst``, \"Pieces in flight\").",
        group="merging")
    rounds_in_flight: int = fields.option(
        ROUNDS_IN_FLIGHT, "a worker's routine merge rounds under way at once (2: the next round is taken while the "
                          "last one's replies are still coming)", fields.Count(1, 2),
        doc="With 2 a round's time on the wire and on the shards overlaps the worker's taking of the next round: "
            "a round then bounds training at about its CPU or its flight, whichever is longer, not their sum "
            "(``docs/scaling.rst``, \"Rounds in flight\": 18-20% faster through 4-7 ms round trips, the same "
            "quality). The trainers' bound is the same (an interval's words a round), but a replica may go one "
            "interval longer without the others' changes when a round outlasts its interval (``lag_limit`` then "
            "shortens the interval). Epoch ends, and "
            "``sync='bsp'``, wait for every reply; 1 takes every round's replies in before the next round.",
        group="merging")
    lag_limit: typing.Optional[float] = fields.option(
        LAG_LIMIT, "a worker's interval plus its rounds' lag (words it trains between taking a round and taking "
                   "the round's replies in) is kept within this many times sync_words (None: never shortened)",
        fields.Real(1.0, 100.0, optional=True),
        doc="The other workers' changes reach a replica an interval and a lag after they were made; where rounds "
            "take longer than their interval (slow links, busy cores) the lag grows and quality goes "
            "(``docs/schedule.rst``, \"The lag\"). Each worker then shortens its own interval so that the two "
            "together stay within this bound, down to a quarter of ``sync_words`` and never below the schedule's "
            "2,200-word floor (chosen through a cluster, its lag included); more rounds a word cost more "
            "merges and bytes a word. From eight workers on (fewer workers' intervals were chosen through the "
            "cluster, their lag included), not with ``sync='bsp'`` or ``'local'``.",
        group="merging")
    checkpoint_dir: typing.Optional[str] = fields.option(
        None, "a folder the dispatcher and the shards write checkpoints to, the same path on every node that runs "
              "one (None: no checkpoints)", fields.Folder(),
        doc="The dispatcher writes its record of the run's progress there, each parameter shard its rows (the "
            "same path must reach the same folder on every such node: a shared filesystem, as for "
            "``corpus_file``). A checkpoint is taken at every epoch end and every ``checkpoint_every`` seconds; "
            "when the dispatcher or a shard dies, ``train()`` waits for it to be restarted (``cluster_timeout``) "
            "and goes on from the last checkpoint; ``train(..., resume_from=DIR)`` goes on with a run whose "
            "client died (``docs/checkpoints.rst``). Made absolute.", group="checkpoints")
    checkpoint_every: float = fields.option(
        CHECKPOINT_EVERY, "seconds between timed checkpoints, besides one at every epoch end",
        fields.Real(0.0, 1e7, low_open=True, unit="seconds"),
        doc="Never sooner than 49 times as long as the last one took, so they cost at most about 2 % of the run.",
        group="checkpoints")
    tensorboard_dir: typing.Optional[str] = fields.option(
        None, "a folder train() writes TensorBoard event files to, distributed only (None: none)", fields.Folder(),
        doc="``tensorboard --logdir DIR`` shows them: loss, words/s overall and per node, learning rate, bytes "
            "per word each way, the merges' share of wall time, CPU and memory per node, against words trained "
            "and wall time; at the end, the embedding projector's files (``pip install "
            "'gensim_distw2v[tensorboard]'``, ``docs/observability.rst``). Made absolute.", group="watching")
    tensorboard_words: int = fields.option(
        TENSORBOARD_WORDS, "the embedding projector gets the vectors of this many most frequent words (0: none)",
        fields.Count(0, 1_000_000), group="watching")
    tensorboard_quality: bool = fields.option(
        False, "with tensorboard_dir, also score the model at every epoch end (analogies, WordSim353, SimLex-999 "
               "from gensim's test data)", fields.Flag(),
        doc="Each pulls the weights from the shards once.", group="watching")

    def to_wire(self):
        """The settings as plain data (they travel whole in the session config)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, msg, what="session settings"):
        """Settings from plain data, every field present and validated as where they were built.

        Raises
        ------
        ValueError
            Not a dict, a missing or unknown field, or a value the constructor refuses.
        """
        if not isinstance(msg, dict):
            raise ValueError(f"malformed {what}: expected a dict, got {type(msg).__name__}")
        missing, unknown = set(cls.names()) - set(msg), set(msg) - set(cls.names())
        if missing or unknown:
            raise ValueError(f"malformed {what}: missing fields {sorted(missing)}, unknown fields "
                             f"{sorted(map(str, unknown))}")
        return cls(**msg)


Settings.__doc__ = Settings.__doc__.replace("    <fields>\n", fields.numpydoc(Settings))
