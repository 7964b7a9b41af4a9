"""Sphinx configuration of gensim_distw2v's docs (``sphinx-build -W -b html docs docs/_build``).

The API reference imports the *installed* package (its compiled modules are built by ``pip
install .``), never the checkout's ``gensim_distw2v/``, which has none.
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))

project = "gensim_distw2v"
author = "the gensim_distw2v developers"
copyright = f"2026-{datetime.date.today().year}, {author}"  # noqa: A001 - Sphinx's name

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "numpydoc",
    "measurements",
    "declared",
]

exclude_patterns = ["_build", "measurements/*.md"]
root_doc = "index"
default_role = "literal"
nitpicky = False

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
intersphinx_mapping = {}  # offline builds: no inventories fetched

html_theme = "alabaster"
html_title = "gensim_distw2v"
html_theme_options = {"description": "Distributed, gensim-compatible Word2Vec", "fixed_sidebar": True,
                      "page_width": "1100px", "sidebar_width": "230px"}
html_static_path = []
