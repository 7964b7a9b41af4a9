"""``python -m gensim_distw2v.worker``."""
from gensim_distw2v.worker.daemon import main

main()
