"""Build script for the compiled modules: the job kernel (``cython/inner.pyx`` -> ``gensim_distw2v._inner``),
the merge row arithmetic (``rows.pyx`` -> ``_rows``), the client's token encoder (``encode.pyx`` -> ``_encode``),
the workers' corpus-file line encoder (``lines.pyx`` -> ``_lines``) and word counter (``counts.pyx`` ->
``_counts``).

The kernel cimports ``gensim.models.word2vec_inner``; its ``.pxd`` and ``voidptr.h`` come from the
gensim installed in the build environment, pinned with Cython in pyproject.toml. The gensim and
Cython versions used are written to ``gensim_distw2v/_build_info.py`` so that the package can
refuse, with a clear message, to run against a different gensim.
"""
import importlib.metadata
import importlib.util
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
GENSIM_DIR = importlib.util.find_spec("gensim").submodule_search_locations[0]

with open(os.path.join(HERE, "gensim_distw2v", "_build_info.py"), "w") as fout:
    fout.write(
        '"""Written by setup.py at build time: what the compiled kernel was built against."""\n'
        f"GENSIM_VERSION = {importlib.metadata.version('gensim')!r}\n"
        f"CYTHON_VERSION = {importlib.metadata.version('Cython')!r}\n"
    )

# the job kernel; the merge protocol's row arithmetic; the client's token encoder; the corpus-file line
# encoder and word counter
extensions = [
    Extension(f"gensim_distw2v.{name}", sources=[f"cython/{source}"],
              depends=["cython/half.h", "cython/q8.h", "cython/siphash.h", "cython/tokens.pxi"],
              include_dirs=[numpy.get_include(), os.path.join(GENSIM_DIR, "models"), "cython"],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
    for name, source in [("_inner", "inner.pyx"), ("_rows", "rows.pyx"), ("_encode", "encode.pyx"),
                         ("_lines", "lines.pyx"), ("_counts", "counts.pyx")]
]

setup(ext_modules=cythonize(extensions, language_level=3, compiler_directives={"embedsignature": True}))
