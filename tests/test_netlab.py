"""The benchmarks' hosts: the delaying relay in process, and the namespaces' delay and shaping for real."""
import asyncio
import os
import socket
import subprocess
import threading
import time

import pytest

from .benchmark_modules import load

delay_relay = load("delay_relay")
netlab = load("netlab")


@pytest.fixture
def relayed():
    """An echo server and a relay to it adding 5 ms each way, on a loop in a thread: their ports."""
    loop = asyncio.new_event_loop()
    ports = {}

    async def setup():
        echo = await delay_relay.echo_server()
        ports["echo"] = echo.sockets[0].getsockname()[1]
        relay = delay_relay.Relay(5.0, ("127.0.0.1", ports["echo"]))
        ports["relay"] = (await relay.serve("127.0.0.1", 0)).sockets[0].getsockname()[1]
        ports["relay_object"] = relay

    loop.run_until_complete(setup())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield ports
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.mark.system
def test_the_relay_adds_its_delay_each_way_and_keeps_every_byte_in_order(relayed):
    direct = delay_relay.measure_rtt(("127.0.0.1", relayed["echo"]), rounds=10)
    through = delay_relay.measure_rtt(("127.0.0.1", relayed["relay"]), rounds=10)
    assert through - direct >= 2 * 5e-3 * 0.95  # at least the delay, each way
    assert through < 0.1  # and not a stall
    payload = os.urandom(3 << 20)
    with socket.create_connection(("127.0.0.1", relayed["relay"]), timeout=10) as sock:
        sender = threading.Thread(target=lambda: (sock.sendall(payload), sock.shutdown(socket.SHUT_WR)))
        sender.start()
        got = bytearray()
        while chunk := sock.recv(1 << 20):
            got += chunk
        sender.join()
    assert bytes(got) == payload  # echoed back through the relay both ways: nothing lost, nothing reordered
    assert relayed["relay_object"].connections == 2 and relayed["relay_object"].bytes >= 2 * len(payload)


@pytest.mark.unit
def test_the_relay_refuses_bad_settings():
    with pytest.raises(ValueError, match="delay_ms"):
        delay_relay.Relay(-1.0)
    with pytest.raises(Exception, match="HOST:PORT"):
        delay_relay.parse_address("nowhere")


@pytest.mark.system
def test_namespaces_get_their_delay_and_rate_and_are_removed():
    why = netlab.missing(delay=True)
    if why:
        assert os.geteuid() != 0 or why.startswith("the ")
        pytest.skip(why)
    with netlab.Network(2, rate="50mbit", delay_ms=3.0) as net:
        tag = net.tag
        rtt = net.rtt_ms()  # the head to host 0, through the head's relay (redirected by nftables)
        assert 6.0 <= rtt < 50.0
        # host 0 to host 1: transparently through host 0's relay, at the link's rate
        server = subprocess.Popen(
            ["ip", "netns", "exec", net.workers[1], "python3", "-c",
             "import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             f"s.bind(('{netlab.address(1)}', 7001)); s.listen(); c, _ = s.accept(); n = 0\n"
             "while d := c.recv(1 << 20):\n    n += len(d)\nc.sendall(str(n).encode()); c.close()"],
            stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        sent = 4 << 20
        client = subprocess.run(
            ["ip", "netns", "exec", net.workers[0], "python3", "-c",
             "import socket, time\n"
             f"s = socket.create_connection(('{netlab.address(1)}', 7001)); t = time.perf_counter()\n"
             f"s.sendall(b'x' * {sent}); s.shutdown(socket.SHUT_WR); n = s.recv(64)\n"
             "print(n.decode(), time.perf_counter() - t)"], capture_output=True, text=True, timeout=60)
        server.wait(10)
        received, seconds = client.stdout.split()
        assert int(received) == sent
        assert sent * 8 / float(seconds) < 50e6 * 1.1  # shaped: no faster than the rate
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert tag not in left, left
