"""Hosts on one machine: network namespaces joined by a bridge, links shaped, round trips added.

:class:`Network` builds a switch namespace with a Linux bridge, a head namespace and K host
namespaces, each joined to the switch by a veth pair. ``rate`` shapes both ends of every veth with
``tc qdisc ... tbf`` (a NIC of that rate each way); ``delay_ms`` adds a round trip of twice that to
every TCP connection between two hosts: each namespace runs a :mod:`delay_relay`, and an nftables
rule redirects the connections its processes open to another host through it (the relay's own
upstream sockets carry a mark the rule lets pass). :class:`Cluster` starts the name server and the
dispatcher on the head and a shard and a worker on each host, HMAC-signed as any cluster beyond
loopback must be, and gives the client's ``ns_conf``, the processes' pids by role, and each host's
NIC counters.

Linux and root only (``ip``, ``tc``; ``nft`` for delays): :func:`missing` says what is missing.
Every namespace is deleted on exit, also on failure or Ctrl-C.
"""
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUBNET = "10.233.0"
KEY = "netlab benchmark key"
PORT = 9090
RELAY_PORT = 9999
RELAY_MARK = 42


def missing(delay=False):
    """Why this machine cannot build a :class:`Network` (None: it can)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc") + (("nft",) if delay else ()):
        if shutil.which(tool) is None:
            package = "nftables" if tool == "nft" else "iproute2"
            return f"the {tool} command is missing (Debian: apt-get install {package})"
    return None


def rate_bits(rate):
    """tc's rate (``100mbit``, ``1gbit``, ``500kbit``) in bits a second."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate.lower().endswith(unit):
            return float(rate[:-len(unit)]) * scale
    raise ValueError(f"rate {rate!r}: give it as tc does, e.g. 100mbit or 1gbit")


def address(index):
    """Host ``index``'s address (-1: the head's)."""
    return f"{SUBNET}.1" if index < 0 else f"{SUBNET}.{10 + index}"


def _cpu_seconds():
    """Busy CPU seconds of every core so far (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat") as fin:
        fields = [int(x) for x in fin.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _busy_seconds(seconds):
    """Busy CPU seconds a second of the machine while it waits ``seconds``."""
    before = _cpu_seconds()
    time.sleep(seconds)
    return (_cpu_seconds() - before) / seconds


def _process_cpu_seconds(pid):
    """A live process's CPU seconds so far (``/proc/PID/stat``: user and system time)."""
    with open(f"/proc/{pid}/stat") as fin:
        fields = fin.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_byte(sender=(), receiver=(), host="127.0.0.1", megabytes=256, message=None):
    """The machine's CPU (ns, every core's, system-wide) per byte one process (its command's prefix
    ``sender``, e.g. ``ip netns exec H``) sends another (``receiver``, listening at ``host``), less
    what the machine spends idle in as long, and of it the two processes' own (their system calls,
    and the packets' work the kernel charges to them). Between namespaces, what a byte costs beyond
    loopback's (both prefixes empty) is a property of the virtual links (a tbf that cuts segments to
    packets, a relay in Python), not of a real NIC; ``machine_projection.this_machine`` counts it
    (``link_ns_per_byte``: the ends', in the roles' CPU; ``host_ns_per_byte``: the rest, on the cores).

    ``message`` (bytes): sent as a round sends its parts, a message and then a one-byte reply awaited
    before the next; None: in bulk, one stream. Through tbf at 100-150 Mbit/s a stream kept the
    queue full and cost 39-47 ns a byte, messages of 20-200 kB 7-16 (no retransmission either way;
    2026-11-29): the bulk figure overstated a round's bytes 2-4x.

    Returns
    -------
    (float, float)
        ns per byte: the machine's, and the sender's and the receiver's of it.
    """
    size = int(megabytes * 1e6) >> 20 << 20
    count = max(1, size // message) if message else 0
    if message:  # read a whole message, then reply
        serve = (f"m = {message}\nbuf = bytearray(m)\nview = memoryview(buf)\nwhile True:\n    got = 0\n"
                 "    while got < m:\n        r = c.recv_into(view[got:])\n        if not r:\n"
                 "            raise SystemExit\n        got += r\n    c.sendall(b'k')\n")
        send = f"chunk = bytes({message})\nfor _ in range({count}):\n    s.sendall(chunk); s.recv(1)\n"
        size = count * message
    else:
        serve = "while c.recv(1 << 20):\n    pass\nc.sendall(b'k')\nimport time; time.sleep(60)"
        send = (f"chunk = bytes(1 << 20)\nfor _ in range({size >> 20}):\n    s.sendall(chunk)\n"
                "s.shutdown(socket.SHUT_WR); s.recv(1)")
    listen = ("import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
              f"s.bind(({host!r}, 0)); s.listen(); print(s.getsockname()[1], flush=True); c, _ = s.accept()\n" + serve)
    server = subprocess.Popen([*receiver, sys.executable, "-c", listen], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        idle = _busy_seconds(0.5)
        send = f"import socket\ns = socket.create_connection(({host!r}, {port}))\n" + send
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        ends = _process_cpu_seconds(server.pid) + children.ru_utime + children.ru_stime
        before, began = _cpu_seconds(), time.perf_counter()
        subprocess.run([*sender, sys.executable, "-c", send], check=True, capture_output=True, timeout=600)
        busy, elapsed = _cpu_seconds() - before, time.perf_counter() - began
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        ends = _process_cpu_seconds(server.pid) + children.ru_utime + children.ru_stime - ends
    finally:
        server.kill()
        server.wait()
    return max(0.0, busy - idle * elapsed) * 1e9 / size, ends * 1e9 / size


class _Opened:
    """A context manager of :meth:`open` and :meth:`close` (closed also when opening fails)."""

    def __enter__(self):
        with contextlib.ExitStack() as undo:
            undo.callback(self.close)  # a failed open leaves nothing behind
            self.open()
            undo.pop_all()
        return self

    def __exit__(self, *exc):
        self.close()


class Network(_Opened):
    """A switch namespace with a bridge, a head namespace and ``k`` host namespaces.

    Parameters
    ----------
    k : int
        Hosts besides the head.
    rate : str, optional
        ``tc tbf`` rate of every link each way (``"1gbit"``, ``"100mbit"``); None: unshaped.
    delay_ms : float
        Added to each direction of every TCP connection between two namespaces (0: none).
    """

    def __init__(self, k, rate=None, delay_ms=0.0):
        self.tag = f"gnl{os.getpid() % 10000}"
        self.k, self.rate, self.delay_ms = k, rate, delay_ms
        self.namespaces, self.relays = [], []
        self.devices = {}  # namespace -> its NIC

    def ip(self, *args):
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def shape(self, ns, dev):
        """``tc tbf`` at the rate, its bucket a quarter of a millisecond of it (at least 16 kB, which tbf
        needs to reach its rate): a message leaves at the rate, as from a real NIC, where a bucket of
        512 kB let a round's 90 kB go at once after an idle moment (measured: 0.2 ms where 100 Mbit/s
        takes 7.3; with this bucket 6.4 ms, and 95 Mbit/s in bulk; at 1 Gbit/s 0.77 ms for 0.73 and
        892 Mbit/s; docs/measurements/validate-projection-explore-2026-11-28.txt)."""
        burst = max(16384, int(rate_bits(self.rate) / 8 * 0.25e-3))
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                        "burst", str(burst), "latency", "20ms"], check=True, capture_output=True, timeout=30)

    def host(self, name, ip_address):
        ns = f"{self.tag}{name}"
        self.ip("netns", "add", ns)
        self.namespaces.append(ns)
        inner, outer = f"{self.tag}{name}i", f"{self.tag}{name}o"
        self.devices[ns] = inner
        self.ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        self.ip("link", "set", inner, "netns", ns)
        self.ip("link", "set", outer, "netns", self.switch)
        self.ip("-n", self.switch, "link", "set", outer, "master", "br0")
        self.ip("-n", ns, "addr", "add", f"{ip_address}/24", "dev", inner)
        for where, dev in ((ns, inner), (self.switch, outer)):
            self.ip("-n", where, "link", "set", dev, "up")
            if self.rate:
                self.shape(where, dev)  # host -> switch and switch -> host: the rate each way
        self.ip("-n", ns, "link", "set", "lo", "up")
        if self.delay_ms:
            self._delay(ns, ip_address)
        return ns

    def _delay(self, ns, own):
        """Every TCP connection from ``ns`` to another host goes through a delaying relay in ``ns``."""
        rules = (f"table ip netlab {{\n chain out {{\n  type nat hook output priority -100; policy accept;\n"
                 f"  meta mark {RELAY_MARK} return\n"
                 f"  ip daddr {SUBNET}.0/24 ip daddr != {own} meta l4proto tcp redirect to :{RELAY_PORT}\n }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True,
                       capture_output=True, timeout=30)
        relay = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, os.path.join(HERE, "delay_relay.py"),
                                  "--listen", f"127.0.0.1:{RELAY_PORT}", "--delay-ms", str(self.delay_ms),
                                  "--mark", str(RELAY_MARK), "--echo", f"{own}:{RELAY_PORT + 1}"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.relays.append(relay)
        if "ready" not in relay.stdout.readline():
            raise RuntimeError(f"the delay relay in {ns} did not start")

    def rtt_ms(self, rounds=50):
        """The median round trip (ms) of a small message from the head to host 0's echo server
        (through the head's relay when delayed; else straight)."""
        if not self.delay_ms:
            return None
        code = (f"import sys; sys.path.insert(0, {HERE!r}); import delay_relay; "
                f"print(delay_relay.measure_rtt(({address(0)!r}, {RELAY_PORT + 1}), {rounds}) * 1e3)")
        out = subprocess.run(["ip", "netns", "exec", self.head, sys.executable, "-c", code], check=True,
                             capture_output=True, text=True, timeout=60)
        return float(out.stdout.strip())

    def cpu_per_byte(self, megabytes=None, message=None):
        """This machine's CPU (ns, every core's) per byte sent from host 0 to host 1 through their links
        as the network has them (the veths, the bridge, tbf, the relay), and the two ends' of it:
        :func:`cpu_per_byte` (in messages of ``message`` bytes, each answered, or in bulk)."""
        if megabytes is None:  # about two seconds' worth at the rate (unshaped: as on loopback)
            megabytes = rate_bits(self.rate) / 8 * 2 / 1e6 if self.rate else 256
        return cpu_per_byte(["ip", "netns", "exec", self.workers[0]], ["ip", "netns", "exec", self.workers[1]],
                            address(1), megabytes, message)

    def counters(self, ns):
        """``(bytes received, bytes sent)`` on a host's NIC so far."""
        out = subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show", "dev", self.devices[ns]], check=True,
                             capture_output=True, text=True, timeout=30).stdout
        stats = json.loads(out)[0]["stats64"]
        return stats["rx"]["bytes"], stats["tx"]["bytes"]

    def open(self):
        self.switch = f"{self.tag}sw"
        self.ip("netns", "add", self.switch)
        self.namespaces.append(self.switch)
        self.ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self.ip("-n", self.switch, "link", "set", "br0", "up")
        self.head = self.host("h", address(-1))
        self.workers = [self.host(f"w{i}", address(i)) for i in range(self.k)]

    def close(self):
        for relay in self.relays:
            relay.kill()
            relay.wait()
        self.relays = []
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)  # takes its veth ends along
        self.namespaces = []


class Cluster(_Opened):
    """A name server and a dispatcher on the head of ``net``, and on each host ``shards_per_host``
    shards and a worker of ``threads`` trainer threads; stopped on exit."""

    def __init__(self, net, threads=1, shards_per_host=1):
        self.net, self.threads, self.shards_per_host = net, threads, shards_per_host
        self.procs = []
        self.env = dict(os.environ, PYRO_HMAC_KEY=KEY, GENSIM_DISTW2V_HMAC_KEY=KEY, PYRO_SERIALIZERS_ACCEPTED="serpent",
                        PYTHONUNBUFFERED="1")
        self.ns_conf = {"host": address(-1), "port": PORT, "hmac_key": KEY}

    def _start(self, name, ns, argv, ready):
        from gensim_distw2v.client.cluster import ManagedProcess

        proc = ManagedProcess(name, ["ip", "netns", "exec", ns, sys.executable, "-P"] + argv, env=self.env)
        self.procs.append(proc)
        proc.wait_for(ready, timeout=120)
        return proc

    def roles(self):
        """``{pid: role}`` of the dispatcher, the shards and the workers."""
        return {proc.pid: proc.name.split("-")[0] for proc in self.procs if proc.name != "nameserver"}

    def open(self):
        net, common = self.net, ["--ns-host", address(-1), "--ns-port", str(PORT)]
        self._start("nameserver", net.head, ["-m", "gensim_distw2v.nameserver", "-n", address(-1), "-p", str(PORT)],
                    "gensim_distw2v.nameserver ready at")  # its key: GENSIM_DISTW2V_HMAC_KEY
        dispatcher = self._start("dispatcher", net.head, ["-m", "gensim_distw2v.dispatcher", "--host", address(-1)]
                                 + common, "ready at")
        for i, ns in enumerate(net.workers):
            for j in range(self.shards_per_host):
                self._start(f"shard-{i}.{j}", ns, ["-m", "gensim_distw2v.shard", "--host", address(i)] + common,
                            "ready at")
            self._start(f"worker-{i}", ns, ["-m", "gensim_distw2v.worker", "--host", address(i), "--threads",
                                            str(self.threads)] + common, "ready at")
        dispatcher.wait_for(rf"\({net.k} workers\)", timeout=120)
        dispatcher.wait_for(rf"\({net.k * self.shards_per_host} shards\)", timeout=120)

    def close(self):
        for proc in reversed(self.procs):
            proc.stop()
        self.procs = []
