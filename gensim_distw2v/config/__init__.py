"""The configuration layer: what a user sets, declared once and validated where it is built.

No threads, no disk, no sockets, and nothing of the protocol: the protocol's records carry these.

* :mod:`~gensim_distw2v.config.fields`: declared fields (a default, a check, a help line, a doc
  entry) and what is made from them (keywords, command-line options, docstrings);
* :mod:`~gensim_distw2v.config.choices`: the values a setting chooses among (the sync modes' table
  among them) and the limits that bound them;
* :mod:`~gensim_distw2v.config.settings`: :class:`~gensim_distw2v.config.settings.Settings`, the
  distributed settings as one validated object.
"""
