"""Strangers without the key against a keyed LocalCluster: what their connections cost the cluster.

A keyed cluster (one worker, one shard) trains ``lee_background.cor`` once undisturbed, then again
while strangers (no key) hold 70 idle connections to the dispatcher and 45 to the name server, send
two handshakes claiming 200 MB to each (the payload sent in full but for its last byte), and drip
one handshake a byte a second; and, at the dispatcher's status page, a request naming another host (DNS
rebinding), 16 requests trickled a byte every half second, and a flood of ``/status.json`` requests
from 4 threads. Prints, per repeat: a new keyed client's ``status()`` latency, whether the keyed
training succeeded and its wall time against the undisturbed one, the dispatcher's and the name
server's memory growth, how many of the strangers' connections the servers had closed within
``--wait`` seconds of the attack's start, the status page's answer to the rebinding request, how many
trickled requests it cut within ``--wait`` seconds, and the flood's requests a second against the
dispatcher's CPU meanwhile. Then a member holding the key and a crafted checkpoint folder attack a
keyed client's run (``benchmarks/insiders.py``: each attack's answer, whether the run still trained
every word, how long the crafted resume took to be answered). Run it on a checkout before and after
a change::

    python benchmarks/attacks.py --repeats 3 --json
"""
import argparse
import json
import socket
import statistics
import struct
import sys
import threading
import time

from insiders import insider_attacks  # (benchmarks/ is on sys.path when this file is run)

IDLE_DISPATCHER, IDLE_NS, HUGE = 70, 45, 200 * 1024 * 1024
INSIDER_CALLS = ("forged_heartbeat", "put_jobs_without_owner", "shard_open_with_workers_token", "takeover_by_resume",
                 "forged_leave", "shard_name_taken_over", "count_open_without_lease")
TRICKLES, FLOOD_THREADS, FLOOD_SECONDS = 16, 4, 3.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wait", type=float, default=20.0, help="seconds to wait for the strangers to be dropped")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser.parse_args(argv)


def pyro_header(data_size):
    """A well-formed Pyro4 (protocol 48) connect header claiming ``data_size`` bytes of msgpack."""
    msg_type, version, serializer, magic = 1, 48, 6, 0x34E9
    checksum = (msg_type + version + data_size + serializer + magic) & 0xFFFF
    return struct.pack("!4sHHHHiHHHH", b"PYRO", version, msg_type, 0, 0, data_size, serializer, 0, 0, checksum)


def send_huge(addr, socks):
    sock = socket.create_connection(addr)
    socks.append(sock)
    chunk = b"\0" * (4 * 1024 * 1024)
    try:
        sock.sendall(pyro_header(HUGE))
        for _ in range(HUGE // len(chunk) - 1):
            sock.sendall(chunk)
        sock.sendall(chunk[:-1])  # the last byte withheld
    except OSError:
        pass  # cut off by the server


def drip(addr, socks, stop, data, every):
    """``data`` sent a byte every ``every`` seconds on a connection of its own (until ``stop``, or cut off)."""
    sock = socket.create_connection(addr)
    socks.append(sock)
    for byte in data:
        if stop.wait(every):
            return
        try:
            sock.send(bytes([byte]))
        except OSError:
            return


def page_attacks(cluster, wait):
    """The status page's answers: to a request naming another host, to trickled requests, to a flood."""
    import urllib.error
    import urllib.request

    import psutil

    url = cluster.status_url
    addr = ("127.0.0.1", int(url.rstrip("/").rsplit(":", 1)[1]))
    with socket.create_connection(addr, timeout=10) as sock:
        sock.sendall(b"GET /status.json HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        rebinding = int(sock.recv(64).split(b" ")[1])
    socks, stop = [], threading.Event()
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"y" * 200  # each byte well within the read timeout
    threads = [threading.Thread(target=drip, args=(addr, socks, stop, request, 0.5), daemon=True)
               for _ in range(TRICKLES)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    served = [0]

    def flood(until):
        while time.monotonic() < until:
            try:
                with urllib.request.urlopen(url + "status.json", timeout=10) as page:
                    page.read()
                served[0] += 1
            except (urllib.error.URLError, OSError):
                pass
    dispatcher = psutil.Process(cluster.processes["dispatcher"].pid)
    cpu = sum(dispatcher.cpu_times()[:2])
    until = time.monotonic() + FLOOD_SECONDS
    flooders = [threading.Thread(target=flood, args=(until,), daemon=True) for _ in range(FLOOD_THREADS)]
    for thread in flooders:
        thread.start()
    for thread in flooders:
        thread.join()
    flood_cpu = sum(dispatcher.cpu_times()[:2]) - cpu
    cut = [closed(sock, started + wait) for sock in list(socks)]
    stop.set()
    for sock in socks:
        sock.close()
    return {"rebinding_status": rebinding, "trickles_cut": sum(c is not None for c in cut), "trickles": len(cut),
            "flood_requests_per_s": served[0] / FLOOD_SECONDS, "flood_dispatcher_cpu_share": flood_cpu / FLOOD_SECONDS}


def closed(sock, until):
    """Seconds from now until the server closes ``sock`` (None: still open at ``until``)."""
    start = time.monotonic()
    try:
        sock.settimeout(max(0.01, until - start))
        while sock.recv(65536):
            sock.settimeout(max(0.01, until - time.monotonic()))
        return time.monotonic() - start
    except ConnectionResetError:
        return time.monotonic() - start
    except OSError:
        return None


def one(repeat, wait):
    import psutil
    from gensim.models.word2vec import LineSentence
    from gensim.test.utils import datapath

    from gensim_distw2v import LocalCluster, Word2Vec
    from gensim_distw2v.io import endpoints, transport
    from gensim_distw2v.client.training import find_dispatcher
    from gensim_distw2v.protocol import tables

    corpus = list(LineSentence(datapath("lee_background.cor")))
    params = dict(vector_size=16, min_count=2, seed=repeat, workers=1, epochs=2, cluster_timeout=20.0)
    with LocalCluster(n_workers=1, hmac_key=f"attacks benchmark key {repeat}", status_port=0) as cluster:
        start = time.monotonic()
        Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, **params)
        clean = time.monotonic() - start
        rss = {role: psutil.Process(cluster.processes[role].pid).memory_info().rss for role in ("dispatcher", "nameserver")}
        dispatcher = find_dispatcher(cluster.ns_conf)
        host, port = str(dispatcher.connection._pyroUri).rsplit("@", 1)[1].rsplit(":", 1)
        targets = {"dispatcher": (host, int(port)), "nameserver": ("127.0.0.1", cluster.ns_conf["port"])}
        uri = str(dispatcher.connection._pyroUri)
        transport.release(dispatcher)
        socks, stop, threads = [], threading.Event(), []
        for addr in (targets["dispatcher"], targets["dispatcher"], targets["nameserver"], targets["nameserver"]):
            threads.append(threading.Thread(target=send_huge, args=(addr, socks), daemon=True))
        threads.append(threading.Thread(target=drip, args=(targets["dispatcher"], socks, stop,
                                                           pyro_header(100) + b"\0" * 100, 1.0), daemon=True))
        attacked = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(2.0)  # the payloads arrive first, then the idle connections
        socks += [socket.create_connection(targets["dispatcher"]) for _ in range(IDLE_DISPATCHER)]
        socks += [socket.create_connection(targets["nameserver"]) for _ in range(IDLE_NS)]
        time.sleep(1.0)
        dispatcher = endpoints.link(uri, tables.DISPATCHER, cluster.ns_conf["hmac_key"], timeout=10.0)  # keyed
        start = time.monotonic()
        try:
            dispatcher.call("status")
            status = time.monotonic() - start
        except transport.PyroError:
            status = None
        start = time.monotonic()
        try:
            Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, **params)
            trained = time.monotonic() - start
        except Exception as err:  # noqa: BLE001 - the benchmark reports it
            trained, error = None, f"{type(err).__name__}: {str(err)[:120]}"
        else:
            error = None
        grown = {role: (psutil.Process(cluster.processes[role].pid).memory_info().rss - was) / 2 ** 20
                 for role, was in rss.items()}
        until = attacked + wait
        drops = [closed(sock, until) for sock in list(socks)]
        stop.set()
        for sock in socks:
            sock.close()
        transport.release(dispatcher)
        page = page_attacks(cluster, wait)
        insiders = insider_attacks(cluster, corpus, params)
    dropped = [d for d in drops if d is not None]
    return {"status_seconds": status, "trained": trained is not None, "train_seconds": trained, "clean_seconds": clean,
            "error": error, "dispatcher_mib": grown["dispatcher"], "nameserver_mib": grown["nameserver"],
            "dropped": len(dropped), "strangers": len(drops), **page, "insiders": insiders}


def main(argv=None):
    args = parse_args(argv)
    rows = []
    for repeat in range(args.repeats):
        row = one(repeat, args.wait)
        rows.append(row)
        status = "no answer" if row["status_seconds"] is None else f"{1000 * row['status_seconds']:.0f} ms"
        train = f"failed ({row['error']})" if not row["trained"] else \
            f"{row['train_seconds']:.2f} s (undisturbed {row['clean_seconds']:.2f} s)"
        print(f"repeat {repeat + 1}: status() {status}; training {train}; memory +{row['dispatcher_mib']:.0f} MiB "
              f"dispatcher, +{row['nameserver_mib']:.0f} MiB name server; strangers dropped {row['dropped']} of "
              f"{row['strangers']}; status page: rebinding request {row['rebinding_status']}, trickled requests cut "
              f"{row['trickles_cut']} of {row['trickles']}, flood {row['flood_requests_per_s']:.0f} requests/s at "
              f"{row['flood_dispatcher_cpu_share']:.0%} of a core of the dispatcher", flush=True)
        print("  insiders: " + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in row["insiders"].items()),
              flush=True)
    summary = {"repeats": args.repeats, "trained": sum(r["trained"] for r in rows),
               "dispatcher_mib": statistics.median(r["dispatcher_mib"] for r in rows),
               "nameserver_mib": statistics.median(r["nameserver_mib"] for r in rows),
               "dropped": statistics.median(r["dropped"] / r["strangers"] for r in rows),
               "status_seconds": None if any(r["status_seconds"] is None for r in rows)
               else statistics.median(r["status_seconds"] for r in rows),  # None: some status() got no answer
               "rebinding_refused": sum(r["rebinding_status"] == 403 for r in rows),
               "trickles_cut": statistics.median(r["trickles_cut"] / r["trickles"] for r in rows),
               "flood_requests_per_s": statistics.median(r["flood_requests_per_s"] for r in rows),
               "flood_dispatcher_cpu_share": statistics.median(r["flood_dispatcher_cpu_share"] for r in rows),
               "insider_refused": {key: sum(r["insiders"].get(key, "").startswith("refused") for r in rows)
                                   for key in INSIDER_CALLS},
               "client_counted": sum(r["insiders"].get("client_count_after_insiders") == "counted every word"
                                     for r in rows),
               "insider_runs_trained": sum(r["insiders"]["keyed_training"] == "trained every word" for r in rows),
               # a worker asked to count a file with no count leased: did it connect to the peer's "shard"?
               "worker_count_kept_from_peer": sum(r["insiders"].get("worker_count_reached")
                                                  == "the peer's shard not reached" for r in rows),
               # an outsider shard's poisoned-merge report: the session must go on (older scripts: absent)
               "poison_ignored": sum(r["insiders"].get("poison_from_outside_shard") == "ignored" for r in rows),
               "crafted_answered": sum(r["insiders"]["crafted_resume_seconds"] is not None for r in rows)}
    print(f"trained under attack in {summary['trained']} of {args.repeats} repeats; median memory growth "
          f"{summary['dispatcher_mib']:.0f} MiB (dispatcher), {summary['nameserver_mib']:.0f} MiB (name server); "
          f"median share of strangers dropped within {args.wait:.0f} s: {summary['dropped']:.0%}; status page: "
          f"rebinding refused in {summary['rebinding_refused']} of {args.repeats}, trickled requests cut "
          f"{summary['trickles_cut']:.0%}, flood {summary['flood_requests_per_s']:.0f} requests/s; insiders: "
          + ", ".join(f"{k} refused {n} of {args.repeats}" for k, n in summary["insider_refused"].items())
          + f"; an outsider shard's poison report ignored in {summary['poison_ignored']} of {args.repeats}"
          + f"; the client's count after an insider's counted every word in {summary['client_counted']} of "
            f"{args.repeats}"
          + f"; the run under their attacks trained in {summary['insider_runs_trained']} of {args.repeats}; a crafted "
          f"resume answered in {summary['crafted_answered']} of {args.repeats}")
    if args.json:
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from provenance import provenance
        print(json.dumps({"provenance": provenance(), "rows": rows, "summary": summary}))


if __name__ == "__main__":
    main()
