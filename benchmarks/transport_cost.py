"""CPU of one call through the package's transport, by message size: the Pyro4 path a merge part takes.

A merge part and its reply are a few hundred kB at a long interval (a 1 G-word corpus's 185 k words,
eight shards: ~600 kB each way). What the shard's handler does with them is measured by
``round_cost.py``; this measures what the transport adds around it, on loopback: a server process
(the package's name server and daemon, msgpack, the same limits) answering ``echo`` calls whose
request and reply carry ``--sizes`` bytes each (an array message, as a merge part's), with and
without an HMAC key, through Pyro4 and through the bulk channel that carries merges
(:mod:`gensim_distw2v.io.channel`, the same server object). It prints, per size, the server's and
the client's CPU per call (medians of ``--repeats`` blocks of ``--calls`` calls), the wall time per
call, and each side's CPU per byte moved (in and out)::

    python benchmarks/transport_cost.py --sizes 1000,65536,600000,4000000 --json
"""
import argparse
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module

import numpy as np  # noqa: E402

from gensim_distw2v.io import channel, endpoints, transport  # noqa: E402
from gensim_distw2v.io.keys import read_hmac_key
from gensim_distw2v.protocol import calls, records  # noqa: E402
from gensim_distw2v.protocol.arrays import pack_array, unpack_array  # noqa: E402

NAME = "gensim_distw2v.transport-probe"


@dataclasses.dataclass
class Echo(records.Record):
    """A request: ``payload`` (an array message of bytes) in, ``size`` bytes back."""

    WHAT: typing.ClassVar[str] = "echo"
    payload: dict
    size: int


TABLE = calls.Table("probe", [calls.Call("echo", Echo, "echo", dict, "bytes back")])


class Prober:
    """The server's object: answers ``size`` bytes (made once per size, as a shard's reply buffer is)."""

    def __init__(self):
        self.replies = {}

    def echo(self, request):
        unpack_array(request.payload, "payload", "uint8", ndim=1)  # checked and viewed, as a merge part's arrays
        reply = self.replies.get(request.size)
        if reply is None:
            reply = self.replies[request.size] = np.frombuffer(os.urandom(request.size), np.uint8)
        return {"data": pack_array(reply)}


def serve(ns_port, key_file):
    """The server process: our daemon for :data:`TABLE` under :data:`NAME` until killed."""
    key = read_hmac_key(key_file) if key_file else None
    served = endpoints.endpoint(TABLE, Prober())
    server = transport.Server(served, NAME, ns_conf={"port": ns_port}, hmac_key=key)
    bulk = channel.ChannelServer(served.call, ["echo"], hmac_key=key)
    print(bulk.address[1], flush=True)
    server.serve()


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cpu(pid):
    with open(f"/proc/{pid}/stat") as fin:
        fields = fin.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args, keyed, workdir):
    """Per path and size: server and client CPU per call, wall per call (medians over blocks)."""
    key_file = None
    if keyed:
        key_file = os.path.join(workdir, "key")
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, os.urandom(32).hex().encode())
        os.close(fd)
    port = _free_port()
    procs = []
    try:
        ns_args = [sys.executable, "-P", "-m", "gensim_distw2v.nameserver", "-n", "127.0.0.1", "-p", str(port)]
        procs.append(subprocess.Popen(ns_args + (["--hmac-key-file", key_file] if keyed else []),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.5)
        procs.append(subprocess.Popen([sys.executable, __file__, "--_serve", str(port), key_file or ""],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        channel_port = int(procs[-1].stdout.readline())
        key = read_hmac_key(key_file) if keyed else None
        ns_conf = {"port": port, **({"hmac_key": key} if key else {})}
        uri = None
        for _ in range(50):
            uri = transport.lookup(ns_conf, NAME)
            if uri:
                break
            time.sleep(0.1)
        out = []
        for path, link in (("pyro4", endpoints.link(uri, TABLE, key, timeout=30.0)),
                           ("channel", channel.ChannelLink(("127.0.0.1", channel_port), TABLE, key, timeout=30.0))):
            out += _sizes(args, keyed, path, link, procs[-1].pid)
            link.release()
        return out
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait()


def _sizes(args, keyed, path, link, server_pid):
    """Per size through ``link``: server and client CPU per call, wall per call (medians over blocks)."""
    out = []
    for size in (int(s) for s in args.sizes.split(",")):
        payload = pack_array(np.frombuffer(os.urandom(size), np.uint8))
        link.call("echo", payload=payload, size=size)  # warm: connection, reply buffer
        blocks = []
        for _ in range(args.repeats):
            server0, client0, wall0 = _cpu(server_pid), time.process_time(), time.perf_counter()
            for _ in range(args.calls):
                link.call("echo", payload=payload, size=size)
            server, client = _cpu(server_pid) - server0, time.process_time() - client0
            blocks.append((server / args.calls, client / args.calls, (time.perf_counter() - wall0) / args.calls))
        server, client, wall = (statistics.median(b[i] for b in blocks) for i in range(3))
        row = {"path": path, "bytes": size, "hmac": keyed, "server_us": server * 1e6, "client_us": client * 1e6,
               "wall_us": wall * 1e6, "server_ns_per_byte": server * 1e9 / (2 * size),
               "client_ns_per_byte": client * 1e9 / (2 * size)}
        out.append(row)
        print(f"{path:>7} {'keyed' if keyed else 'plain':>6} {size:>9,} B each way: server "
              f"{row['server_us']:8.0f} us, client {row['client_us']:8.0f} us, wall {row['wall_us']:8.0f} us a "
              f"call; ns a byte moved: server {row['server_ns_per_byte']:.2f}, client "
              f"{row['client_ns_per_byte']:.2f}", flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,65536,600000,4000000", help="bytes each way, comma-separated")
    parser.add_argument("--calls", type=int, default=20, help="calls per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks per size (medians reported)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--_serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._serve:
        return serve(int(args._serve[0]), args._serve[1] or None)
    with tempfile.TemporaryDirectory(prefix="transport_cost_") as workdir:
        rows = measure(args, False, workdir) + measure(args, True, workdir)
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "rows": rows}))


if __name__ == "__main__":
    main()
