"""A member holding the cluster's key (threat model c) against a keyed client's run, and a crafted
checkpoint folder (threat model d): the attacks of issue 38, for ``benchmarks/attacks.py``.

While a keyed client trains with checkpoints, an insider registers as a worker, joins the session
(so it has what every worker is told: the session's config, checkpoint folder and identity
included, and the workers' token), leaves it, then: sends a heartbeat in the real worker's name,
puts jobs with the workers' token, asks a shard to open the session with the workers' token,
resumes the run's checkpoint folder (taking the session over), sends the real worker's ``leave``,
and says hello under the live shard's name. Then (issue 54) it asks a worker to count a file of its
choosing with no count leased (before item 7 the worker read it), opens vocabulary counts of its own on
the shard (four, as many as a shard held; before the dispatcher leased counts, they made every
client's count fail for 15 minutes) and the client counts its corpus on the cluster. Then a client
resumes from a
folder whose ``meta.json`` is a symlink to ``/dev/zero`` (its manifest edited to say 0 bytes, and
signed with the key where the package signs manifests). Reports each attack's answer, whether the
client's run still trained every word, how long the crafted resume took to be answered, and
whether the dispatcher answered ``status()`` meanwhile. Works against this package before and
after the fixes (calls sent as plain data; fields it does not know left out).
"""
import json
import os
import tempfile
import threading
import time

CRAFTED_WAIT = 20.0  # seconds the crafted resume may take before it counts as unanswered


def _answer(call):
    """``"accepted"``, or ``"refused (<code>)"`` with the fault's code."""
    try:
        call()
        return "accepted"
    except ValueError as err:
        return f"refused ({getattr(getattr(err, 'code', None), 'value', type(err).__name__)})"


def _in_thread(fn):
    result = {}

    def run():
        try:
            result["value"] = fn()
        except Exception as err:  # noqa: BLE001 - reported
            result["error"] = f"{type(err).__name__}: {str(err)[:160]}"
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _crafted(folder, key):
    """A dispatcher checkpoint whose ``meta.json`` is a symlink to ``/dev/zero``."""
    from gensim_distw2v.io import store

    signing = hasattr(store, "manifest_mac")
    kept = store.CheckpointStore(folder, "dispatcher", **({"key": key} if signing else {}))
    kept.write({"run": "r", "identity": {}, "shards": 1, "finished": False, "point": {}}, {}, sequence=1)
    os.remove(os.path.join(kept.path(1), "meta.json"))
    os.symlink("/dev/zero", os.path.join(kept.path(1), "meta.json"))
    path = os.path.join(kept.path(1), "MANIFEST.json")
    with open(path) as fin:
        manifest = json.load(fin)
    manifest["files"]["meta.json"]["size"] = 0
    if signing:
        manifest["mac"] = store.manifest_mac(key, manifest)
    with open(path, "w") as fout:
        json.dump(manifest, fout)


def insider_attacks(cluster, corpus, params):
    """The attacks (see the module's docstring) on ``cluster`` (a keyed LocalCluster): a dict of answers."""
    from gensim_distw2v import Word2Vec, protocol
    from gensim_distw2v.client.training import find_dispatcher
    from gensim_distw2v.io import endpoints, transport
    from gensim_distw2v.protocol import tables
    from gensim_distw2v.versions import versions

    root = tempfile.mkdtemp(prefix="insiders-")
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=os.path.join(root, "run"),
                     checkpoint_every=0.3, **params)
    model.build_vocab(corpus)
    epochs = 12
    training, trained = _in_thread(lambda: model.train(corpus, total_examples=model.corpus_count, epochs=epochs))
    link = find_dispatcher(cluster.ns_conf)
    out = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            session = link.call("status").session
            if session is not None and session.state == "running" and \
                    (link.send("progress", {"session": session.id}).get("checkpoints") or {}).get("committed"):
                break
            time.sleep(0.05)
        sid = session.id
        real = next(iter(link.call("status").workers))
        name = protocol.WORKER_PREFIX + "insider"
        secret = link.send("hello", {"name": name, "uri": "PYRO:insider@127.0.0.1:1", "versions": versions(),
                                     "threads": 1})
        mine = {"secret": secret} if isinstance(secret, str) else {}
        joined = link.send("join", {"name": name, "session": sid, **mine})
        link.send("quit_session", {"name": name, "session": sid, "reason": "insider", **mine})
        out["forged_heartbeat"] = _answer(lambda: link.send("heartbeat", {"name": real, "known": sid, "wait": 0.0}))
        # the client's calls with what a member knows: none may keep the session alive or feed it
        out["put_jobs_without_owner"] = _answer(lambda: link.send("put_jobs", {"session": sid, "jobs": [],
                                                                              **({"token": joined["token"]} if mine
                                                                                 else {})}))
        config = joined["config"]
        spec = {"session": sid, "index": 0, "count": 1, "vocab_size": config["params"]["vocab_size"],
                "vector_size": config["params"]["vector_size"], "weights": ["syn0", "syn1neg"],
                "merge": config["settings"]["merge"], "merge_dtype": config["settings"]["merge_dtype"],
                "damp_rows": config["damp_rows"], "hot_rows": config["hot_rows"], "versions": versions(),
                "token": joined["token"]}
        shard = endpoints.link(joined["shards"][0][1], tables.SHARD, cluster.hmac_key, timeout=20.0)
        try:
            out["shard_open_with_workers_token"] = _answer(lambda: shard.send("open_session", spec))
        finally:
            shard.release()
        config["checkpoint"]["resume"] = True
        out["takeover_by_resume"] = _answer(lambda: link.send("open_session", config))
        out["forged_leave"] = _answer(lambda: link.send("leave", {"name": real}))
        shard_name, shard_uri = joined["shards"][0]
        out["shard_name_taken_over"] = _answer(lambda: link.send("shard_hello", {
            "name": shard_name, "uri": "PYRO:insider@127.0.0.1:2", "versions": versions()}))
        # a shard of its own, outside the session, reporting a poisoned merge to fail it and blame a worker
        outsider = protocol.SHARD_PREFIX + "insider"
        shard_secret = link.send("shard_hello", {"name": outsider, "uri": "PYRO:insider@127.0.0.1:3",
                                                 "versions": versions()})
        link.send("shard_beat", {"name": outsider, "known": sid, "wait": 0.0, "poisoned": {"0": "forged"},
                                 **({"secret": shard_secret} if isinstance(shard_secret, str) else {})})
        state = link.send("progress", {"session": sid}).get("state")
        out["poison_from_outside_shard"] = "ignored" if state == "running" else f"the session is {state}"
        link.send("shard_leave", {"name": outsider, **({"secret": shard_secret} if isinstance(shard_secret, str)
                                                       else {})})
    finally:
        transport.release(link)
    training.join(180)
    out["keyed_training"] = "trained every word" if trained.get("value", (0, 0))[1] == epochs * sum(
        len(s) for s in corpus) else f"failed ({trained.get('error', 'words missing')})"
    out.update(_count_attacks(cluster, corpus, params, root))
    crafted = os.path.join(root, "crafted")
    _crafted(crafted, cluster.hmac_key)
    resumer = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **params)
    resumer.build_vocab(corpus)
    began = time.monotonic()
    resume, resumed = _in_thread(lambda: resumer.train(corpus, total_examples=len(corpus), epochs=1,
                                                       resume_from=crafted))
    time.sleep(1.0)  # the resume is being answered (or not) meanwhile
    status = _status_within(cluster, 5.0)
    resume.join(CRAFTED_WAIT)
    out["crafted_resume_seconds"] = None if resume.is_alive() else round(time.monotonic() - began, 2)
    out["crafted_resume_answer"] = "no answer" if resume.is_alive() else resumed.get("error", "trained")[:120]
    out["status_during_crafted_resume"] = status
    return out


def _count_attacks(cluster, corpus, params, root):
    """A keyed peer's counts on the shard, then the client's count of its corpus on the cluster."""
    from gensim_distw2v import Word2Vec
    from gensim_distw2v.client.training import find_dispatcher
    from gensim_distw2v.io import endpoints, transport
    from gensim_distw2v.protocol import tables

    path = os.path.join(root, "corpus.txt")
    with open(path, "w") as fout:
        fout.writelines(" ".join(sentence) + "\n" for sentence in corpus)
    link = find_dispatcher(cluster.ns_conf)
    try:
        status = link.call("status")
        (shard_name, shard_entry), = list(status.shards.items())[:1]
        uri = shard_entry.uri
        worker_uri = next(iter(status.workers.values())).uri
    finally:
        transport.release(link)
    answer, reached = _worker_count(cluster, worker_uri, shard_name, root)
    out = {"worker_count_without_lease": answer, "worker_count_reached": reached}
    shard = endpoints.link(uri, tables.SHARD, cluster.hmac_key, timeout=30.0)
    try:
        for i in range(4):  # as many as a shard held; the first refusal means none is held
            out["count_open_without_lease"] = _answer(lambda: shard.send("count_open", {
                "count": f"insider{i}", "token": "insider", "index": 0, "parts": 1}))
            if out["count_open_without_lease"] != "accepted":
                break
    finally:
        shard.release()
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **params)
    try:
        model.build_vocab(corpus_file=path)
        words = sum(len(sentence) for sentence in corpus)
        out["client_count_after_insiders"] = "counted every word" if model.corpus_total_words == words else \
            f"counted {model.corpus_total_words} of {words} words"
    except Exception as err:  # noqa: BLE001 - reported
        out["client_count_after_insiders"] = f"failed ({type(err).__name__}: {str(err)[:120]})"
    return out


def _worker_count(cluster, worker_uri, shard_name, root):
    """A keyed peer asks a worker to count a file of its choosing (no count leased), its words to go to a
    "shard" the peer listens as: the worker's answer, and whether it connected there with the file's words
    (before issue 54's item 7 it read the file and did; now it refuses before it opens any file)."""
    import socket

    from gensim_distw2v.io import endpoints
    from gensim_distw2v.io.corpusfile import fingerprint
    from gensim_distw2v.protocol import tables

    path = os.path.join(root, "private.txt")
    with open(path, "w") as fout:
        fout.write("words of a file the peer wants read\n" * 100)
    found = fingerprint(path)
    corpus = {"path": path, "size": found["size"], "digest": found["digest"], "range_bytes": found["size"],
              "total_words": 1, "start_alpha": 0.025, "end_alpha": 0.0001}
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    reached, done = [], threading.Event()

    def listen():
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            reached.append(1)
            conn.close()

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    shard = [shard_name, f"PYRO:{shard_name}@127.0.0.1:{listener.getsockname()[1]}"]
    worker = endpoints.link(worker_uri, tables.WORKER, cluster.hmac_key, timeout=30.0)
    try:
        answer = _answer(lambda: worker.send("count", {"count": "insider-count", "tokens": ["t"], "corpus": corpus,
                                                       "ranges": [[0, 0, found["size"]]], "shards": [shard]}))
    finally:
        worker.release()
        time.sleep(0.5)
        done.set()
        thread.join()
        listener.close()
    return answer, ("the peer's shard reached" if reached else "the peer's shard not reached")


def _status_within(cluster, seconds):
    """``"answered"`` if a new keyed link's ``status()`` returns within ``seconds``, else why not."""
    thread, result = _in_thread(lambda: _status(cluster, seconds))
    thread.join(seconds + 1.0)
    if thread.is_alive():
        return f"no answer in {seconds:.0f} s"
    return "answered" if "value" in result else result["error"]


def _status(cluster, seconds):
    """The dispatcher's ``status()`` on a new keyed link, waiting at most ``seconds`` for it."""
    from gensim_distw2v.client.training import find_dispatcher
    from gensim_distw2v.io import transport

    link = find_dispatcher(cluster.ns_conf)
    try:
        link.timeout = seconds
        return link.call("status")
    finally:
        transport.release(link)
