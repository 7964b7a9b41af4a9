"""The client side: a ``train()`` call on a cluster (:mod:`~gensim_distw2v.client.training`, with
:mod:`~gensim_distw2v.client.session`, :mod:`~gensim_distw2v.client.links`,
:mod:`~gensim_distw2v.client.checkpoints`, :mod:`~gensim_distw2v.client.report`) and a cluster of
local processes (:mod:`~gensim_distw2v.client.cluster`)."""
