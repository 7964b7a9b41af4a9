"""The merge schedule: how often workers merge, and which rows each round carries (no network).

Every ``sync_words`` words per worker (:func:`default_sync_words`) a routine round merges the *hot*
rows of ``syn0`` and ``syn1neg`` (:func:`hot_rows`) and of hs's ``syn1`` (:func:`tree_hot_rows`);
every ``cold_every``-th round merges every row, and epoch ends flush exactly. The ``damp`` rule damps
the first rows (:func:`damped_rows`). Measured in benchmarks/clustersim.py and through the cluster
(docs/schedule.rst).
"""
import numpy as np


# The ``damp`` rule damps the first rows (vocabulary order: most frequent first) of ``syn0`` and
# ``syn1neg``, and with hs the busiest tree nodes of ``syn1`` (``damped_rows(tree_counts=...)``): those a
# worker sees at least DAMP_OCCURRENCES times per merge interval on average, and at most OUTPUT_DAMP_MOST
# output rows; chosen by measurement (docs/merge_rule.rst)
DAMP_OCCURRENCES = 1.5
OUTPUT_DAMP_MOST = 1000
# ... counted per DAMP_WORDS words at most (:func:`damp_words`), whatever the interval: a damped row trains
# like 1/K of the data where its workers' updates agree, and counted per a long interval the damped rows
# became the mid-frequency words that learn, not the frequent ones that overshoot (discourse text, 40 M
# tokens, K=8, 7,407 words a merge: -10.4 analogy points counted per interval, -0.1 per 2,222 words;
# docs/schedule.rst, "Quality at the words' grain")
DAMP_WORDS = 2_200
# The merge schedule (docs/schedule.rst): every SYNC_SHARE of an epoch's words (at least SYNC_WORDS,
# at most ONE_WORKER_SYNC_WORDS) per worker at FEW_WORKERS workers (8 / K of it with more), a routine round merges
# the *hot* rows of ``syn0`` and ``syn1neg`` (the words a worker sees at least HOT_SIGHTINGS times
# per interval: about the 1,000 most frequent of devmix); every
# COLD_EVERY-th round merges every row, and epoch ends flush exactly. Down, a routine reply carries the
# hot rows a worker lacks and, of the others, those of the jobs it holds. Measured in
# benchmarks/clustersim.py and through the cluster at K = 2, 4, 8 (docs/schedule.rst).
SYNC_WORDS = 2_200
# the rounds' lag shortens an interval (settings.lag_limit) to this share of the one asked at most
LAG_SHORTEST = 0.25
# The interval a corpus tolerates grows with the corpus: at K=8 (CBOW, simulated) one round per
# 5,400th of an epoch's words cost 0.68, 0.45 and 0.64 analogy points on 3 M, 6 M and 12 M words,
# four times that interval 2.47 (3 M) and 2.10 (12 M) points (docs/schedule.rst, "The interval").
SYNC_SHARE = 1 / 5_400
# Skip-gram merges SG_SHORTER times as often as CBOW at every K: at K=8 on 40 M tokens of discourse text, one
# epoch, simulated, the CBOW share lost 10.7 analogy points to gensim, half of it gained 0.7 (docs/schedule.rst,
# "Skip-gram at half the share"; a likely reason: skip-gram moves a word's output row once per (word, context)
# pair, about window + 1 times per occurrence, where CBOW moves it once)
SG_SHORTER = 2
# Of the rounds that merge the rare words' rows (every cold_every-th), CBOW sends syn1neg's rare rows (the
# negatives' pushes) up in every 4th: the same quality at K=8, a fifth less merge CPU, 28% less at 1 M rows
# (docs/scaling.rst, "Rare output rows"; skip-gram lost 7.6 points and sends them in every one)
CBOW_COLD_OUTPUT_EVERY = 4
ONE_WORKER_SYNC_WORDS = 1_000_000
# with fewer workers than this the interval is longer (default_sync_words): (FEW_WORKERS / K) ** 1.5 for CBOW,
# ** 2.5 for skip-gram: measured at K=2 on devmix (docs/schedule.rst, "Fewer workers, longer intervals")
FEW_WORKERS = 8
# with more workers than FEW_WORKERS the share is (FEW_WORKERS / K) ** MANY_WORKERS_POWER of eight's: through a
# real cluster, 120 M tokens of discourse text, CBOW, one epoch, two seeds, sixteen workers at 8 / K (11,111
# words) lost 5.4 analogy points to gensim, at (8 / K) ** 2 (5,556) gained 5.8; eight at theirs gained 4.6
# (docs/schedule.rst, "The lag")
MANY_WORKERS_POWER = 2
HOT_SIGHTINGS = 0.25
# the matrices whose rows are words in vocabulary order (most frequent first); hs's syn1 is tree nodes,
# busiest first as the cluster trains them (kernel.reverse_tree), with counts of their own
BY_FREQUENCY = ("syn0", "syn1neg")
# a piece of a routine merge round (round_pieces) has at least this many rows
PIECE_ROWS = 1024


def damp_words(sync_words):
    """The words a worker trains in which the ``damp`` rule counts a row's sightings (:func:`damped_rows`):
    the interval, at most :data:`DAMP_WORDS` (2,200).

    Counted per interval, the damped rows grew with it: at 7,407 words a merge (a 40 M-token corpus's
    interval at K=8) they reached the mid-frequency words, whose workers' updates agree because they
    learn the same thing, not because they overshoot; damped, those rows trained like one worker's
    data, and the cluster lost 10.4 analogy points to gensim (30 at K=16) where a clock of 2,222 words
    lost 0.1 (7.8 at K=16). On devmix the same clock cut K=8's loss at four times the interval from 3.6
    points to 2.7 (one epoch), and two workers of CBOW at their 17.6 k words kept gensim's quality over
    three epochs (docs/schedule.rst, "Quality at the words' grain").

    Parameters
    ----------
    sync_words : int
        Words each worker trains between merges.

    Returns
    -------
    int
    """
    return min(int(sync_words), DAMP_WORDS)


def damped_rows(counts, sync_words, occurrences=DAMP_OCCURRENCES, tree_counts=None, output_most=None):
    """How many of the first rows the ``damp`` rule damps, per matrix: the words a worker sees at
    least ``occurrences`` times in ``sync_words`` trained words (expected from their counts); of
    the output vectors at most ``output_most`` (default :data:`OUTPUT_DAMP_MOST`).

    Only rows that get several updates on every worker within one interval overshoot when the
    workers' updates are summed; damping rows that get one update or none slows their learning
    (measured at K=8, 2.2 k words: damping 1,000 rows of each matrix cost ws353 0.04 against the
    ~160 this gives). Output vectors are capped: the negatives push all mid-frequency output rows
    alike, which is not overshoot (measured at K=4: damping every output row cost ws353 0.11).
    The rows counted are a prefix: with an unsorted vocabulary (``sorted_vocab=0``) it stops at
    the first word below the threshold.

    Parameters
    ----------
    counts : array_like
        Word counts in vocabulary order.
    sync_words : int
        Words each worker trains between merges.
    occurrences : float
        Expected sightings per interval that make a row hot.
    tree_counts : array_like, optional
        With hs: per ``syn1`` row (tree node, busiest first: :func:`gensim_distw2v.core.kernel.reverse_tree`),
        how often it is on a trained word's path (:func:`gensim_distw2v.core.kernel.node_counts`). The
        nodes near the root are on nearly every word's path: every worker moves them many times
        per interval, and summed they overshoot as the frequent words' rows do (measured at K=8,
        skip-gram: docs/schedule.rst), so they are damped by the same rule and threshold.

    Returns
    -------
    dict of (str, int)
        ``{"syn0": n, "syn1neg": min(n, output_most)}``, and ``"syn1"``'s count of such nodes
        when ``tree_counts`` is given.
    """
    seen = _seen(counts, sync_words, occurrences)
    most = OUTPUT_DAMP_MOST if output_most is None else int(output_most)
    out = {"syn0": _prefix(seen), "syn1neg": min(_prefix(seen), most)}
    if tree_counts is not None:
        out["syn1"] = _prefix(_seen(tree_counts, sync_words, occurrences, total=np.sum(counts, dtype=np.float64)))
    return out


def _prefix(seen):
    """How many first rows are seen (0 when nothing is known)."""
    return 0 if seen is None else len(seen) if seen.all() else int(np.argmin(seen))


def _seen(counts, words, times, total=None):
    """Per row, whether a worker training ``words`` words expects to see its word at least
    ``times`` times (from the counts, of ``total`` words: default their sum); None when there are
    no counts."""
    counts = np.asarray(counts, dtype=np.float64)
    total = float(counts.sum()) if total is None else float(total)
    return None if total <= 0 else counts * float(words) >= times * total


def tree_hot_rows(tree_counts, words_total, sync_words, sightings=HOT_SIGHTINGS):
    """How many first rows of hs's ``syn1`` (tree nodes, busiest first:
    :func:`gensim_distw2v.core.kernel.reverse_tree`) merge in every round: the nodes a worker expects
    to pass at least ``sightings`` times in ``sync_words`` words, as :func:`hot_rows` counts the
    words (``tree_counts``: :func:`gensim_distw2v.core.kernel.node_counts`; ``words_total``: the
    words' count)."""
    return _prefix(_seen(tree_counts, sync_words, sightings, total=words_total))


def hot_rows(counts, sync_words, sightings=HOT_SIGHTINGS):
    """How many first rows of ``syn0`` and ``syn1neg`` merge in every round: the words a worker
    expects to see at least ``sightings`` times in ``sync_words`` words (from their counts). The
    rows after them (rarer words) are *cold*: they merge every ``cold_every``-th round and at
    epoch ends, and their change waits in ``R - B`` (and in the server's stale bits) meanwhile,
    as held-back rows do. The count depends on the interval, not on the number of workers, so
    neither does the traffic of a routine round.

    Measured (docs/schedule.rst): at K=8, merging the first 1,000 rows of devmix (a quarter of a
    sighting per worker and interval of 2,209 words) every round and the rest every 6th cost 0.21
    analogy points against 0.35 for every row in every round; the quality a long interval loses is
    the frequent rows'.

    Parameters
    ----------
    counts : array_like
        Word counts in vocabulary order.
    sync_words : int
        Words each worker trains between merges.
    sightings : float
        Expected sightings per worker and interval that make a row hot.

    Returns
    -------
    int
        Rows up to the last hot one (with an unsorted vocabulary, ``sorted_vocab=0``, every hot
        row is below it, with cold ones among them); every row when there are no counts.
    """
    seen = _seen(counts, sync_words, sightings)
    if seen is None:  # no counts (a vocabulary built by hand): no row is known to be cold
        return len(counts)
    hot = np.flatnonzero(seen)
    return int(hot[-1]) + 1 if len(hot) else 0


def output_hot_rows(counts, sync_words, negative=0, cum_table=None, sg=True, sightings=HOT_SIGHTINGS):
    """How many first rows of ``syn1neg`` merge in every round: for CBOW with negative sampling, the output rows
    a worker expects to touch, as the word it predicts or as a negative it draws, at least ``sightings`` times in
    :func:`damp_words` of ``sync_words`` (at most 2,200) words, and never fewer than the words' hot rows
    (:func:`hot_rows`); for skip-gram, and without negatives, the words' hot rows.

    A negative is drawn from every word by its count to the power 0.75 (gensim's ``cum_table``), so a CBOW
    worker touches many more output rows per word than input rows: at devmix's first 5 M words and 2,200 words
    a merge, 7,559 output rows a quarter of a time against 1,135 words. Merged only every ``cold_every``-th
    round, those rows are pushed by every worker from values some rounds old, and on text whose lines come
    grouped by topic every worker pushes them the same way at once: simulated at K=8 (three epochs, two
    seeds), SimLex 0.048 below gensim ``workers=1`` with the words' hot rows, 0.014 with these and
    ``cold_output_down='with_up'`` (docs/schedule.rst, "CBOW's negatives on ordered text"). Counted per 2,200
    words at most, as the damped rows are: at a large corpus's interval the words' hot rows hold them already,
    so a large corpus's rounds do not grow. Skip-gram touches ``window + 1`` times as many output rows a word:
    counted the same way its every row would merge every round; it keeps the words' hot rows (its quality
    holds with them: "The matrix").

    Parameters
    ----------
    counts : array_like
        Word counts in vocabulary order (most frequent first).
    sync_words : int
        Words each worker trains between merges.
    negative : int
        Negatives drawn per predicted word (0: none, no ``syn1neg``).
    cum_table : array_like, optional
        gensim's cumulative table of the negatives' distribution (``model.cum_table``).
    sg : bool
        Skip-gram (else CBOW).
    sightings : float
        Expected touches per worker and clock that make a row hot.

    Returns
    -------
    int
    """
    hot = hot_rows(counts, sync_words, sightings)
    if sg or not negative or cum_table is None or not len(counts):
        return hot
    counts = np.asarray(counts, dtype=np.float64)
    table = np.asarray(cum_table, dtype=np.float64)
    total = float(counts.sum())
    if total <= 0 or len(table) != len(counts) or table[-1] <= 0:
        return hot
    drawn = np.diff(table, prepend=0.0) / table[-1]  # each row's share of the negatives drawn
    seen = damp_words(sync_words) * (counts / total + negative * drawn) >= sightings
    return max(hot, _prefix(seen))


def default_sync_words(n_workers, corpus_words=0, sg=True):
    """Words each worker trains between merges, by default: :data:`SYNC_SHARE` of the corpus's words
    per epoch at :data:`FEW_WORKERS` (8) workers; with more, ``(8 / K) ** 2`` of that
    (:data:`MANY_WORKERS_POWER`; the merges per trained word, and their bytes and CPU, grow as K squared
    beyond 8); and a longer share
    with fewer workers: ``(8 / K) ** 1.5`` times as long for CBOW, ``(8 / K) ** 2.5`` for skip-gram
    (8 and 32 times at K=2); skip-gram (and hs with ``sg=1``) at half of all that
    (:data:`SG_SHORTER`); at least :data:`SYNC_WORDS` (2,200) and at most 1 M; one worker merges
    every 1 M words (its merges only make its progress durable).

    Skip-gram's half share is from 2026-11-29: on 40 M tokens of discourse text in document order,
    one epoch, simulated (seed 1), eight workers at CBOW's share (7,407 words) lost 10.7 analogy
    points to gensim ``workers=1`` and at half of it gained 0.7 (the floor, 2,200 words: +0.9); two
    workers at 32 times the share lost 1.7 and at half of that 0.9 (docs/schedule.rst, "Skip-gram at
    half the share"). Damping more output rows instead (4,000) lost 15.

    Beyond eight workers the share was the same until 2026-11-28, when synthetic text with analogies
    at the words' grain showed sixteen workers at it losing 7.8 analogy points to gensim at 40 M
    tokens and 18.4 at 120 M (one epoch, CBOW, the damp clock at 2,222 and 2,200 words), where half of it
    gained 2.1 points at 40 M (docs/schedule.rst, "Quality at the words' grain").

    The interval is the hot rows' clock (:func:`hot_rows`): quality hangs on how often the
    frequent words' rows merge, on how many workers move them meanwhile, and on how long the run
    is. At K=8 the same share of the corpus cost the same quality on 3 M, 6 M and 12 M words, while
    a fixed 2,200 words cost 0.64 analogy points on 12 M words and 2.47 on 3 M (docs/schedule.rst),
    so the interval grows with the corpus, which is what lets large corpora merge rarely (a 1
    G-word corpus: 185 k words at K=8). Fewer workers tolerate longer intervals (two workers merging
    as often as eight made the cluster of two slower than gensim ``workers=2``): on devmix (12 M
    words), 3 epochs, seeds 1-2, two workers held gensim's quality for skip-gram at 70 k words
    (``400 k / K**2.5``, the old rule; -0.73 analogy points) but not for CBOW at 35 k (-1.65 points:
    CBOW moves a frequent row more per word trained), which holds at 17.6 k (docs/schedule.rst,
    "Fewer workers, longer intervals"). The evidence's range: devmix, 3-12 M words, K <= 8, three
    epochs; synthetic text with analogies at the words' grain (``benchmarks/discourse_corpus.py``),
    12-120 M tokens, K = 8, 16 and 32, CBOW, one epoch, one or two seeds: at the rule's interval K=8
    held gensim's analogies at 40 M tokens once the damp rule's clock stopped at 2,200 words
    (:func:`damp_words`; -0.1 points, -10.4 before; a second seed +2.3) and beat them at 120 M
    (22,222 words); K=16 at ``8 / K`` of that share beat them at 40 M and 120 M; at 12 M, one epoch,
    K=8 loses 4.2 points even at the floor (an undertrained run) (docs/schedule.rst, "Quality at
    the words' grain"). Beyond it (a 1 G-word corpus; K=32; skip-gram and hs on large corpora) it
    is an extrapolation: pass ``sync_words`` to choose. Those figures are the simulator's; through a
    real cluster of eight processes (40 M tokens in document order, one epoch) CBOW at K=8 gained
    6.4 points on gensim ``workers=8`` once workers reading the text took in only their ranges' rows
    (before: -4.8), K=2 at its 59,259 words lost 1.7-1.8, and skip-gram at K=8 lost 8.5 at CBOW's
    share (docs/schedule.rst, "the simulator against the cluster"); at half of it, with reading
    workers taking in the rows of the ranges they hold, skip-gram gained 1.5 points at K=8 and held
    gensim's quality at K=2 (two seeds; "Skip-gram at half the share"). Sixteen workers through a real
    cluster on two cores (40 M tokens, shuffled, one epoch, two seeds) lost 6.45 points at this rule's
    3,704 words (then ``8 / K`` of eight's share) with rounds in flight, their replies taken in 1.5
    intervals late on average: quality follows the interval and that lag together
    (``settings.lag_limit`` bounds them at 1.65 intervals asked; with it, -0.1 points at that
    interval: docs/schedule.rst, "The lag"). The simulator's rounds have no lag. At 120 M tokens
    (2026-11-30, through the cluster, the lag bounded, two seeds) sixteen workers at ``8 / K`` (11,111
    words) lost 5.4 analogy points (+0.016 on the pairs) and at ``(8 / K) ** 2`` (5,556) gained 5.8
    (+0.12), eight at their 22,222 words gained 4.6: hence ``(8 / K) ** 2`` beyond eight (at 40 M it is the
    floor, which held). K=32 is not measured through a cluster. Hierarchical softmax takes its
    model's rule (``sg``).

    Parameters
    ----------
    n_workers : int
        Workers in the session.
    corpus_words : int, optional
        Raw words per epoch (0: unknown, the floor).
    sg : bool, optional
        Skip-gram (else CBOW).
    """
    if n_workers <= 1:
        return ONE_WORKER_SYNC_WORDS
    if n_workers > FEW_WORKERS:  # more workers: (8 / K) ** 2 (through a cluster, 8 / K lost analogies at K=16)
        longer = (FEW_WORKERS / n_workers) ** MANY_WORKERS_POWER
    else:
        longer = (FEW_WORKERS / n_workers) ** (2.5 if sg else 1.5)
    share = SYNC_SHARE * longer * max(0, int(corpus_words or 0)) / (SG_SHORTER if sg else 1)
    return int(min(ONE_WORKER_SYNC_WORDS, max(SYNC_WORDS, round(share))))


def shortest_interval(asked):
    """The shortest interval the rounds' lag may shorten one of ``asked`` words to (``settings.lag_limit``): a
    quarter of it (:data:`LAG_SHORTEST`: at most four times the rounds a word asked for), and never below the
    floor, :data:`SYNC_WORDS` (chosen through a cluster, its lag included: an interval at the floor or below
    it is not shortened)."""
    return max(1, int(asked * LAG_SHORTEST), min(int(asked), SYNC_WORDS))


def default_cold_output_every(sg):
    """Of the rounds that merge the rare words' rows (every ``cold_every``-th), every how many also
    send ``syn1neg``'s rare rows up, by default: :data:`CBOW_COLD_OUTPUT_EVERY` for CBOW, every one
    for skip-gram.

    Measured (docs/scaling.rst, "Rare output rows"; one epoch of 40 M tokens of synthetic text in
    document order, K=8, two seeds): CBOW with its rare output rows every 24th round instead of every
    6th scored the same (+0.2 and +0.9 analogy points, +0.013 and +0.019 on the truth list) with a
    fifth less merge CPU and bytes up, and at a 1 M-word vocabulary 28% less of a worker's
    routine merge CPU; skip-gram lost 7.6 points (its output rows move about ``window`` times as
    often per occurrence as CBOW's).
    """
    return 1 if sg else CBOW_COLD_OUTPUT_EVERY


def default_cold_output_down(sg):
    """Which rare rows of ``syn1neg`` a round that merges the rare rows brings down to a worker, by default
    (``settings.cold_output_down``): ``'all'`` it lacks for skip-gram, ``'with_up'`` for CBOW (every one it
    lacks in the rounds that also send its own changes to them up, every ``cold_output_every``-th: the 24th;
    those of the jobs it holds in the others; ``'held'`` until 2026-12-01).

    CBOW on devmix's first 5 M words grouped by topic, K=8, simulated, two seeds: with ``'held'`` a rare output
    row a worker draws as a negative but holds no job for came down only at the epoch's end, and SimLex was
    0.048 below gensim ``workers=1``; with ``'with_up'`` and the negatives' output rows hot
    (:func:`output_hot_rows`) 0.014, as with ``'all'``, which brings 4% more bytes a word down
    (docs/schedule.rst, "CBOW's negatives on ordered text").

    Measured (docs/schedule.rst, "Skip-gram's negatives"; devmix's first 5 M words, three epochs, K=8,
    simulated, seed 1): skip-gram lost SimLex 0.023 to gensim ``workers=1`` (0.098 against 0.121) while a
    worker's rare output rows came down only with its jobs, the negatives it drew from them as it had left
    them; with every row a worker lacks coming down in those rounds SimLex came within 0.006. CBOW scored no
    better that way.
    """
    return "all" if sg else "with_up"


def wanted_only(cold_output_down):
    """The matrices whose rare rows a reply carries only where the worker wants them
    (:class:`gensim_distw2v.core.merge.GlobalWeights`'s ``wanted_only``), for ``cold_output_down``:
    ``syn0`` alone under ``'all'``, both under ``'held'`` and ``'with_up'`` (whose worker asks for every
    ``syn1neg`` row in its rounds that send them: :func:`output_down`)."""
    return ("syn0",) if cold_output_down == "all" else BY_FREQUENCY


def output_down(cold_output_down, rounds, cold_every, cold_output_every, flush=False):
    """Whether round number ``rounds`` asks for every rare ``syn1neg`` row the worker lacks
    (:class:`gensim_distw2v.protocol.rounds.MergePart`'s ``output_down``): under ``'with_up'``, the rounds that
    send syn1neg's rare rows up (every ``cold_every * cold_output_every``-th; :func:`round_rows`); never for a
    flush (it carries every row anyway) nor under ``'all'`` (the shard sends them in every cold round) or
    ``'held'``."""
    return cold_output_down == "with_up" and not flush and rounds % (cold_every * cold_output_every) == 0


def row_limits(hot_rows, tree_hot_rows=-1, output_hot_rows=None):
    """What a routine round reads of each matrix, for :meth:`~gensim_distw2v.core.merge.GlobalWeights.apply` and
    :meth:`~gensim_distw2v.core.replica.Replica.take_delta`: None (every row) if ``hot_rows`` is negative; else the
    words' hot
    rows (``syn0``, and ``syn1neg`` unless ``output_hot_rows`` gives it more: :func:`output_hot_rows`) and, if
    ``tree_hot_rows`` is not negative, hs's ``syn1`` below that (otherwise every ``syn1`` row)."""
    if hot_rows is None or hot_rows < 0:
        return None
    out = int(hot_rows) if output_hot_rows is None or output_hot_rows <= hot_rows else int(output_hot_rows)
    if (tree_hot_rows is None or tree_hot_rows < 0) and out == hot_rows:
        return int(hot_rows)
    return {"syn0": int(hot_rows), "syn1neg": out,
            "syn1": -1 if tree_hot_rows is None or tree_hot_rows < 0 else int(tree_hot_rows)}


def round_rows(rounds, hot_rows, tree_hot_rows, cold_every, cold_output_every, flush=False, output_hot_rows=None):
    """Which rows a worker's merge round takes: ``(cold, hot, tree, limits)``.

    Every ``cold_every``-th round (and every epoch's flush) is *cold*: it merges the rare words' rows
    too, and its reply carries every row the worker lacks and wants (``hot`` and ``tree`` -1, as
    they go on the wire); the others take the hot rows only. Of the cold rounds that are not
    flushes, only every ``cold_output_every``-th sends the change of ``syn1neg``'s rare rows (the
    output rows every worker's negatives push, most of a cold round's rows at a large vocabulary):
    in the others it waits in ``R - B``, as held-back rows do, while their values still come down.

    Parameters
    ----------
    rounds : int
        The round's number, counted from 1 (flushes included).
    hot_rows, tree_hot_rows : int
        The hot rows of ``syn0`` and ``syn1neg`` (:func:`hot_rows`) and of hs's ``syn1``
        (:func:`tree_hot_rows`; -1: every ``syn1`` row).
    cold_every, cold_output_every : int
        The settings of those names.
    flush : bool
        An epoch's flush (every row, exactly).
    output_hot_rows : int, optional
        ``syn1neg``'s hot rows where they are more than the words' (:func:`output_hot_rows`).

    Returns
    -------
    tuple
        Whether the round is cold; the hot rows and tree rows it names on the wire (-1: every
        row); what the worker takes of each matrix (:func:`row_limits`, or a dict per matrix).
    """
    cold = flush or rounds % cold_every == 0
    hot, tree = (-1, -1) if cold else (hot_rows, tree_hot_rows)
    limits = row_limits(hot, tree, output_hot_rows)
    if cold and not flush and rounds % (cold_every * cold_output_every):
        out = hot_rows if output_hot_rows is None else max(hot_rows, output_hot_rows)
        limits = {"syn0": -1, "syn1neg": int(out), "syn1": -1}
    return cold, hot, tree, limits


def round_pieces(parts, top, pieces, piece_rows=PIECE_ROWS):
    """A merge round's parts cut into pieces: each piece's rows are taken while the piece before is on
    its way (on the wire, folded on the shards, replied), so a round's time on the wire and on the
    shards overlaps its taking, but for its last piece's.

    Parameters
    ----------
    parts : list of (int, int)
        The round's row ranges ``[lo, hi)`` (each at most ``part_bytes`` on the wire).
    top : int
        Where a routine round's rows end (its hot rows': the rest of a part is taken only as far as it
        is wanted); negative: every row (a cold round).
    pieces : int
        At least this many pieces in all, when the parts are fewer (the ``round_pieces`` setting);
        1: the parts as they are.
    piece_rows : int
        Fewest rows of a piece (a piece costs a message to every shard).

    Returns
    -------
    list of (int, int)
        Row ranges in order, together the parts' rows: each part's ``[lo, min(hi, top))`` cut into
        equal pieces, its last piece running to the part's end.
    """
    if pieces <= len(parts):
        return list(parts)
    out = []
    for lo, hi in parts:
        end = hi if top < 0 else min(hi, max(lo, top))
        n = max(1, min(-(-pieces // len(parts)), (end - lo) // piece_rows))
        cuts = [lo + (end - lo) * i // n for i in range(n)] + [hi]
        out.extend(zip(cuts[:-1], cuts[1:]))
    return out
