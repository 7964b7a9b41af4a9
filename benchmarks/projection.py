"""The projection's model, by the name the benchmarks import it under.

The model lives in the package (:mod:`gensim_distw2v.projection`: the command line's closing summary
projects a run's costs with it too); ``import projection`` from here gives that module itself.
"""
import sys

import gensim_distw2v.projection as _model

sys.modules[__name__] = _model
