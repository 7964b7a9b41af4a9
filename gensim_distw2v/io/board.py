"""TensorBoard event files of a distributed training run (``tensorboard_dir``).

The client writes them as it polls the dispatcher for progress (:class:`Board`): scalars against
the effective words trained so far (TensorBoard's step) and wall time, so both of TensorBoard's
x axes work. Tags:

* ``train/loss`` (the summed loss, as gensim's ``get_latest_training_loss``; with
  ``compute_loss``), ``train/loss_per_word`` (its change per word since the last point),
  ``train/words_per_second`` (effective, over the session), ``train/learning_rate``;
* ``network/bytes_up_per_word``, ``network/bytes_down_per_word`` (workers to and from shards, per
  effective word), ``merge/share_of_wall_time`` (the workers' wall seconds in merge rounds over
  the session's, per worker; with ``sync="ssp"`` rounds overlap training);
* per node (``node/<role>-<id>/...``): ``words_per_second``, ``cpu_percent`` (of one core, since
  the last point), ``kernel_cpu``, ``merge_cpu``, ``other_cpu`` (seconds), ``rss_mb``;
* ``quality/analogy``, ``quality/ws353``, ``quality/simlex999`` at epoch ends
  (``tensorboard_quality``);

and at the end the embedding projector's files for the most frequent ``tensorboard_words``
words. The writer is tensorboardX's (no TensorFlow needed); ``tensorboard --logdir DIR`` shows
the folder.
"""
import logging
import time

from gensim_distw2v.io.store import private_dir, tighten

logger = logging.getLogger(__name__)

__all__ = ["Board", "evaluate", "node_tag"]


def evaluate(wv):
    """gensim's standard word-vector scores on the test data shipped with gensim:
    ``{"analogy", "ws353", "simlex999"}`` (accuracy on questions-words.txt, Spearman on the two
    similarity sets)."""
    from gensim.test.utils import datapath

    analogy, _ = wv.evaluate_word_analogies(datapath("questions-words.txt"))
    ws353 = wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0]
    simlex = wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0]
    return {"analogy": float(analogy), "ws353": float(ws353), "simlex999": float(simlex)}


def node_tag(name, role):
    """A node's tag prefix: ``node/worker-3f9a1b2c4d5e``, ``node/dispatcher``."""
    short = name.rsplit(".", 1)[-1]
    return f"node/{role}" if short == role else f"node/{role}-{short}"


def _writer(logdir):
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise ImportError("tensorboard_dir needs tensorboardX, which is not installed: pip install "
                          "'gensim_distw2v[tensorboard]' (or pip install tensorboardX)") from None
    return SummaryWriter(logdir=logdir, flush_secs=10)


class Board:
    """One training run's TensorBoard events.

    Parameters
    ----------
    logdir : str
        The folder (made if missing).
    """

    def __init__(self, logdir):
        self.logdir = private_dir(logdir, "tensorboard_dir")  # 0700: the events and vectors are the user's
        self.writer = _writer(logdir)
        self.last = None  # (wall, words, loss) of the last point
        self.cpu = {}  # node name -> (its seconds, its CPU seconds) at the last point

    def scalars(self, step, values, walltime=None):
        """Write ``{tag: value}`` at ``step`` (effective words trained)."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in values.items():
            if value is not None:
                self.writer.add_scalar(tag, float(value), global_step=int(step), walltime=walltime)

    def progress(self, progress, words, elapsed, alpha, compute_loss):
        """A point of the run from a :class:`gensim_distw2v.protocol.Progress`.

        Parameters
        ----------
        words : int
            Effective words trained in the run so far (the step).
        elapsed : float
            Seconds since the session started.
        alpha : float
            The learning rate now.
        compute_loss : bool
            Whether the loss is tracked.
        """
        now = time.time()
        values = {"train/learning_rate": alpha,
                  "train/words_per_second": words / elapsed if elapsed > 0 else None,
                  "network/bytes_up_per_word": progress.total("bytes_up") / words if words else None,
                  "network/bytes_down_per_word": progress.total("bytes_down") / words if words else None}
        if progress.workers and elapsed > 0:  # under ssp merge rounds overlap training: this is their share
            values["merge/share_of_wall_time"] = progress.total("merge_seconds") / (elapsed * len(progress.workers))
        if compute_loss:
            values["train/loss"] = progress.loss
            if self.last is not None and words > self.last[1]:
                values["train/loss_per_word"] = (progress.loss - self.last[2]) / (words - self.last[1])
        for name, node in (progress.nodes or {}).items():
            tag = node_tag(name, node.role)
            seconds, cpu = self.cpu.get(name, (0.0, 0.0))
            self.cpu[name] = (node.seconds, node.cpu)
            values.update({f"{tag}/words_per_second": node.words_per_second if node.role == "worker" else None,
                           f"{tag}/cpu_percent": 100 * (node.cpu - cpu) / (node.seconds - seconds)
                           if node.seconds > seconds and node.cpu >= cpu else None,
                           f"{tag}/kernel_cpu": node.kernel_cpu if node.role == "worker" else None,
                           f"{tag}/merge_cpu": node.merge_cpu, f"{tag}/other_cpu": node.other_cpu,
                           f"{tag}/rss_mb": node.rss / 2 ** 20})
        self.scalars(words, values, now)
        self.last = (now, words, progress.loss)

    def quality(self, words, scores):
        """Scores (:func:`evaluate`) at an epoch end, ``words`` trained so far."""
        self.scalars(words, {f"quality/{name}": value for name, value in scores.items()})

    def projector(self, wv, n):
        """The embedding projector's files: the ``n`` most frequent words' vectors, and the words."""
        n = min(n, len(wv))
        if n:
            self.writer.add_embedding(wv.vectors[:n], metadata=list(wv.index_to_key[:n]), tag="word2vec")
            logger.info("TensorBoard: the projector has the %i most frequent words' vectors in %s", n, self.logdir)

    def close(self):
        self.writer.close()
        tighten(self.logdir)  # the files tensorboardX wrote under the umask: 0600
