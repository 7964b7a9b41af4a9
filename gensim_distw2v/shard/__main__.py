"""``python -m gensim_distw2v.shard``."""
from gensim_distw2v.shard.daemon import main

main()
