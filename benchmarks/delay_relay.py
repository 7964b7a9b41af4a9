"""A delaying TCP relay: round trips added to a link where the kernel has no netem.

Every byte read on one side of a connection is written to the other side ``--delay-ms`` later
(each direction, so a round trip through the relay gains twice that), in order, at the rate it
came. Upstream is either one fixed address (``--to HOST:PORT``) or, transparently, where the
connection was going before a firewall rule redirected it here (``SO_ORIGINAL_DST``): in a network
namespace, ``netlab.Network(delay_ms=...)`` sends every TCP connection that leaves the "host" for
another one through its relay with an nftables ``redirect``, and the relay marks its own upstream
sockets (``SO_MARK``) so that the rule lets them pass.

A chunk read is held in a queue until it is due (at most ``--window`` bytes a direction are held:
a relay on a fast link is then a link of that window per delay, as TCP is); the relay sets
``TCP_NODELAY`` both ways, so that it adds the delay and not Nagle's. asyncio's timers wake up
to a millisecond late on epoll, so measure the round trip it gives (:func:`measure_rtt`) rather
than assume it.

    ip netns exec H python benchmarks/delay_relay.py --listen 127.0.0.1:9999 --delay-ms 2.5 --mark 42
    python benchmarks/delay_relay.py --listen 127.0.0.1:9999 --delay-ms 2.5 --to 127.0.0.1:9090
"""
import argparse
import asyncio
import contextlib
import socket
import struct
import sys
import time

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h: where a redirected connection was going
CHUNK = 1 << 16
WINDOW = 8 << 20  # bytes held a direction, at most


def parse_address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def original_destination(sock):
    """``(host, port)`` a connection redirected by nftables/iptables was going to (IPv4)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(packed), port


class Relay:
    """The relay's connections on the running asyncio loop (:meth:`serve`)."""

    def __init__(self, delay_ms, target=None, mark=0, window=WINDOW):
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        self.delay, self.target, self.mark, self.window = delay_ms / 1e3, target, mark, window
        self.connections = 0
        self.bytes = 0

    async def serve(self, host, port):
        """Listen at ``(host, port)``; returns the asyncio server (its ``sockets`` say the port)."""
        return await asyncio.start_server(self._handle, host, port, limit=CHUNK)

    async def _handle(self, reader, writer):
        loop = asyncio.get_running_loop()
        down = writer.get_extra_info("socket")
        up = None
        try:
            dest = self.target or original_destination(down)
            up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if self.mark:
                up.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, self.mark)
            up.setblocking(False)
            await loop.sock_connect(up, dest)
            for sock in (down, up):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            up_reader, up_writer = await asyncio.open_connection(sock=up, limit=CHUNK)
        except OSError:
            if up is not None:
                up.close()
            writer.close()
            return
        self.connections += 1
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)
        for each in (writer, up_writer):
            each.close()

    async def _pipe(self, reader, writer):
        """Copy ``reader`` to ``writer``, each chunk ``delay`` after it was read."""
        loop = asyncio.get_running_loop()
        queue, held, room = asyncio.Queue(), [0], asyncio.Event()
        room.set()

        async def read():
            try:
                while True:
                    await room.wait()
                    data = await reader.read(CHUNK)
                    held[0] += len(data)
                    if held[0] >= self.window:
                        room.clear()
                    queue.put_nowait((loop.time() + self.delay, data))
                    if not data:
                        return
            except OSError:
                queue.put_nowait((loop.time(), b""))

        async def write():
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
                self.bytes += len(data)
                held[0] -= len(data)
                if held[0] < self.window:
                    room.set()

        reading = asyncio.ensure_future(read())
        try:
            await write()
        finally:
            reading.cancel()


def measure_rtt(address, rounds=50, size=64):
    """Median seconds of a ``size``-byte ping-pong with an echo server at ``address`` (through a relay,
    the round trip it gives)."""
    samples = []
    with socket.create_connection(address, timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = b"x" * size
        for _ in range(rounds):
            began = time.perf_counter()
            sock.sendall(payload)
            got = 0
            while got < size:
                chunk = sock.recv(size - got)
                if not chunk:
                    raise ConnectionError("the echo server closed the connection")
                got += len(chunk)
            samples.append(time.perf_counter() - began)
    samples.sort()
    return samples[len(samples) // 2]


async def echo_server(host="127.0.0.1", port=0):
    """An echo server on the running loop (what :func:`measure_rtt` talks to)."""
    async def echo(reader, writer):
        with contextlib.suppress(OSError):
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        writer.close()
    return await asyncio.start_server(echo, host, port)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", type=parse_address, required=True, help="HOST:PORT to accept connections at")
    parser.add_argument("--delay-ms", type=float, required=True, help="added to each direction")
    parser.add_argument("--to", type=parse_address, help="upstream HOST:PORT (default: the redirected destination)")
    parser.add_argument("--mark", type=int, default=0, help="SO_MARK of the upstream sockets (needs CAP_NET_ADMIN)")
    parser.add_argument("--echo", type=parse_address, help="also serve an echo server here (to measure the RTT)")
    args = parser.parse_args(argv)

    async def run():
        relay = Relay(args.delay_ms, args.to, args.mark)
        server = await relay.serve(*args.listen)
        if args.echo:
            await echo_server(*args.echo)
        print(f"delay relay ready at {server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
