"""Real OpenSSH servers for the launcher's tests: keys made for the test, ``sshd -D -e`` on an
address and port (in a network namespace, or not) with a config of its own (nothing under
/etc/ssh), stopped with every session and command under it; network namespaces joined by a
bridge (each reaches the others and this namespace); and what every launcher test checks at its
end (:func:`nothing_left`: no process of the package left running).
"""
import os
import signal
import socket
import subprocess
import time

import pytest

SSHD = "/usr/sbin/sshd"


def make_keys(folder):
    """A host key, a client key, an authorized_keys file and a known_hosts file (the host key for any
    host) in ``folder``: ``{name: path}``."""
    keys = {"host": os.path.join(folder, "host_key"), "client": os.path.join(folder, "client_key"),
            "authorized": os.path.join(folder, "authorized_keys")}
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"test-{name}", "-f", keys[name]],
                       check=True, stdin=subprocess.DEVNULL, timeout=30)
    with open(keys["client"] + ".pub") as fin, open(keys["authorized"], "w") as fout:
        fout.write(fin.read())
    keys["known_hosts"] = os.path.join(folder, "known_hosts")  # the host key, for every address and port
    with open(keys["host"] + ".pub") as fin, open(keys["known_hosts"], "w") as fout:
        fout.write("* " + " ".join(fin.read().split()[:2]) + "\n")
    return keys


class Sshd:
    """``sshd`` listening on ``address:port`` (inside network namespace ``netns`` if given); with
    ``client_alive=False`` as sshd's defaults are, never asking whether a client is still there (a
    session over a cut network lives until TCP's keepalive, hours)."""

    def __init__(self, folder, keys, address, port, netns=None, client_alive=True):
        self.address, self.port, self.netns = address, port, netns
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation folder
        name = f"sshd-{netns or 'here'}-{port}"
        conf = os.path.join(folder, name + ".conf")
        with open(conf, "w") as fout:
            fout.write("\n".join([
                f"Port {port}", f"ListenAddress {address}", f"HostKey {keys['host']}",
                f"AuthorizedKeysFile {keys['authorized']}", f"PidFile {os.path.join(folder, name + '.pid')}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "UseDNS no", "PrintMotd no"]
                + (["ClientAliveInterval 5", "ClientAliveCountMax 2"] if client_alive else [])) + "\n")
        self.log = os.path.join(folder, name + ".log")
        argv = ([] if netns is None else ["ip", "netns", "exec", netns]) + [SSHD, "-D", "-e", "-f", conf]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 10
        while f"Server listening on {address} port {port}." not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not start on {address}:{port}: {self.text()[-2000:]}")
            time.sleep(0.02)

    def text(self):
        with open(self.log, errors="replace") as fin:
            return fin.read()

    def stop(self):
        """Stop it, its sessions and what they run (each session is a process group of its own)."""
        for pid in [self.proc.pid] + descendants(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)


def descendants(pid):
    """Every process under ``pid`` (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fin:
                    parent = int(fin.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def package_processes(exclude=()):
    """``{pid: command line}`` of the running processes of this package's servers and agents."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in exclude and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fin:
                    cmdline = fin.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "-m gensim_distw2v." in cmdline:
                found[int(entry)] = cmdline
    return found


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def nothing_left():
    """Every process of the package started during the test is gone at its end (within 20 s)."""
    before = set(package_processes())
    yield
    deadline = time.monotonic() + 20
    while True:
        left = {pid: cmd for pid, cmd in package_processes().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == {}, f"left running: {left}"


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Bridge:
    """Network namespaces ``names`` on one bridge of this namespace (``subnet``.1): ``addresses``
    maps each to ``subnet``.2, .3, ...; every one reaches the others and this namespace."""

    def __init__(self, tag, names, subnet):
        self.tag, self.names, self.bridge = tag, [f"{tag}{n}" for n in names], f"{tag}br"
        self.gateway = f"{subnet}.1"
        self.addresses = {}
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for number, ns in enumerate(self.names, start=2):
            host_end = f"{ns}h"
            ip("netns", "add", ns)
            ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", host_end, "master", self.bridge)
            ip("link", "set", host_end, "up")
            ip("-n", ns, "addr", "add", f"{subnet}.{number}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            self.addresses[ns] = f"{subnet}.{number}"

    def remove(self):
        """Kill what runs in the namespaces, then delete them, their links and the bridge; tried again for a
        few seconds while any is left (a killed process holds its namespace until it has exited)."""
        deadline = time.monotonic() + 10
        while True:
            for ns in self.names:
                pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
                subprocess.run(["ip", "link", "del", f"{ns}h"], capture_output=True, timeout=30)  # (gone with it)
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
            left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
            links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
            if not set(left) & set(self.names) and f" {self.bridge}:" not in links \
                    or time.monotonic() > deadline:
                return
            time.sleep(0.2)
