"""The hosts of a launch: ``--hosts HOST[:THREADS][,HOST...]`` read into :class:`Host` records."""
import dataclasses
import re

__all__ = ["Host", "parse_hosts"]

_HOST = re.compile(r"^(?:(?P<user>[A-Za-z0-9_][A-Za-z0-9_.-]*)@)?"  # (never a leading "-": no ssh option)
                   r"(?P<address>[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:]+\])(?::(?P<threads>\d+))?$")


@dataclasses.dataclass(frozen=True)
class Host:
    """One host: where ``ssh`` goes (``destination``: ``[user@]address``), the address its servers
    bind and are reached at, its worker's trainer threads (0: its cores less one, for its shard),
    and how messages name it (``label``: the address, numbered when a host is given twice)."""

    destination: str
    address: str
    threads: int
    label: str


def parse_hosts(text):
    """``HOST[:THREADS][,HOST...]`` as a list of :class:`Host`.

    Raises
    ------
    ValueError
        An entry that is not ``[user@]address[:threads]`` (threads 1-4096), or no host at all.
    """
    entries = [entry.strip() for entry in (text or "").split(",") if entry.strip()]
    if not entries:
        raise ValueError("--hosts: give at least one host, as HOST[:THREADS][,HOST[:THREADS]...]")
    hosts, seen = [], {}
    for entry in entries:
        match = _HOST.match(entry)
        threads = int(match.group("threads") or 0) if match else 0
        if match is None or (match.group("threads") is not None and not 1 <= threads <= 4096):
            raise ValueError(f"--hosts: {entry!r} is not [user@]address[:threads] (threads from 1 to 4096), e.g. "
                             f"node1:16 or alice@10.0.0.2")
        address = match.group("address").strip("[]")
        destination = (f"{match.group('user')}@" if match.group("user") else "") + address  # (ssh takes bare IPv6)
        seen[address] = seen.get(address, 0) + 1
        label = address if seen[address] == 1 else f"{address}#{seen[address]}"
        hosts.append(Host(destination=destination, address=address, threads=threads, label=label))
    return hosts
