"""Progress bars for the command line: the vocabulary's count and the epochs, from the client's log records.

The client logs its progress (:mod:`gensim_distw2v.client.report` every ``report_delay`` seconds of
training, at INFO; :mod:`gensim_distw2v.client.vocab` as ranges are counted, at DEBUG), each record carrying
its figures as a structured ``progress`` attribute (``logging``'s ``extra``): no text is parsed.
:class:`ProgressBars` is a logging handler the command line attaches to those two loggers when it is
quiet (the Python API keeps gensim's logging: nothing here runs unless attached); it draws one
`tqdm <https://tqdm.github.io/>`_ bar per stage on standard error.
"""
import logging

from tqdm import tqdm

__all__ = ["ProgressBars", "LOGGERS"]

# the loggers whose records carry progress
LOGGERS = ("gensim_distw2v.client.report", "gensim_distw2v.client.training", "gensim_distw2v.client.vocab")


class ProgressBars(logging.Handler):
    """A bar for the count (ranges counted) and one for the training (raw words, all epochs), with
    words/s, merges and bytes per word beside it.

    Parameters
    ----------
    stream : file, optional
        Where the bars go (default: standard error).
    """

    def __init__(self, stream=None):
        super().__init__(level=logging.DEBUG)
        self.stream, self.bars = stream, {}

    def attach(self):
        """Receive the progress records (their loggers at DEBUG: their lines still reach only the root
        logger's handlers whose level lets them through); returns self."""
        for name in LOGGERS:
            found = logging.getLogger(name)
            found.addHandler(self)
            found.setLevel(logging.DEBUG)
        return self

    def detach(self):
        """Stop receiving records and close the bars."""
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self)
        self.close()

    def close(self):
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
        super().close()

    def emit(self, record):
        figures = getattr(record, "progress", None)
        if not isinstance(figures, dict):
            return
        try:
            self._show(figures)
        except Exception:  # noqa: BLE001 - a display must never stop a run
            self.handleError(record)

    def _bar(self, stage, total, unit, desc):
        bar = self.bars.get(stage)
        if bar is None:
            for other in [s for s in self.bars if s != stage]:  # one stage at a time
                self.bars.pop(other).close()
            bar = self.bars[stage] = tqdm(total=total, unit=unit, unit_scale=True, desc=desc, file=self.stream,
                                          dynamic_ncols=True, leave=True, mininterval=0.2)
        return bar

    def _show(self, figures):
        stage = figures.get("stage")
        if stage == "count":
            bar = self._bar("count", figures["ranges"], "range", "counting the vocabulary")
            bar.update(figures["done"] - bar.n)
            bar.set_postfix_str(f"{figures['words']:,} words, {figures['workers']} workers")
            if figures["done"] >= figures["ranges"]:  # counted: the bar ends now, not when training begins
                self.bars.pop("count").close()
        elif stage == "train":
            bar = self._bar("train", figures["total_words"], "word", "training")
            bar.update(max(0, figures["words"] - bar.n))
            bar.set_postfix_str(f"epoch {figures['epoch'] + 1}/{figures['epochs']}, {figures['words_per_s']:,.0f} "
                                f"words/s, {figures['merges']} merges, {figures['bytes_per_word']:.1f} B/word")
