"""What one ``train()`` call's parts share on the client: the model, its settings, the open session's
secret, the run's clocks and counts.

:class:`~gensim_distw2v.client.training.DistributedTraining` makes one :class:`RunState` per call and
hands it to its collaborators (:class:`~gensim_distw2v.client.session.SessionSetup`,
:class:`~gensim_distw2v.client.checkpoints.Resumes`, :class:`~gensim_distw2v.client.report.Reports`):
every field is set up here, so a reader finds the state of a run in one place.
"""
import time

from gensim_distw2v.config.settings import Settings
from gensim_distw2v.io import keys

__all__ = ["RunState"]


class RunState:
    """The state of one ``train()`` call of a model on a cluster, across its sessions (a run resumed
    after a loss has several).

    Parameters
    ----------
    model : gensim_distw2v.Word2Vec
        The model (vocabulary built); its weights are sent, trained remotely and copied back.
    ns_conf : dict
        Where the name server is (``host``, ``port``, ``broadcast``, ``hmac_key``).
    settings : gensim_distw2v.config.settings.Settings, optional
        How to train on the cluster (default: the model's ``settings``).

    Attributes
    ----------
    token : str or None
        The open session's owner secret (:class:`gensim_distw2v.protocol.Opened`'s ``owner``).
    given_file : bool
        ``train()`` was given a ``corpus_file`` (not a ``LineSentence`` the workers read).
    stats : dict
        The last session's figures (``Word2Vec.cluster_stats``), set at its end.
    board : gensim_distw2v.io.board.Board or None
        TensorBoard's writer while ``train()`` writes events.
    begun : set of int
        Epochs whose callbacks' ``on_epoch_begin`` ran (once each, across resumes).
    resumes : int
        Sessions resumed after a loss.
    checkpoint_wait : float
        Seconds the client waited at epoch ends for checkpoints.
    failed_reported : int
        The last failed checkpoint logged (each is logged once).
    awaiting : int or None
        The epoch end's checkpoint the client waits for (its own wait logs that one).
    shard_count : int
        Shards of the last session (a resumed one waits for as many).
    call_start, session_start, next_report : float
        ``time.monotonic()`` at the call's start, the session's start, and when the next progress
        line is due.
    """

    def __init__(self, model, ns_conf, settings=None):
        settings = settings if settings is not None else model.settings
        if not isinstance(settings, Settings):
            raise ValueError(f"settings must be a gensim_distw2v.config.settings.Settings, got {type(settings).__name__}")
        self.model, self.ns_conf, self.settings = model, dict(ns_conf or {}), settings
        self.hmac_key = keys.ns_settings(self.ns_conf)[3]
        self.token = None
        self.given_file = False
        self.stats = {}
        self.board = None
        self.failed_reported = 0
        self.awaiting = None
        self.shard_count = 1
        self.started()  # (begun, resumes, checkpoint_wait and the clocks)

    def started(self):
        """A new ``train()`` call's run: its clocks, epochs and counts from zero."""
        self.call_start = self.session_start = self.next_report = time.monotonic()
        self.begun, self.resumes, self.checkpoint_wait = set(), 0, 0.0
