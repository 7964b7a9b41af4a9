"""``python -m gensim_distw2v.dispatcher``."""
from gensim_distw2v.dispatcher.daemon import main

main()
