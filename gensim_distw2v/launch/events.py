"""What a host's agent tells its launcher (:mod:`gensim_distw2v.launch.agent`, one JSON object a
line on the agent's standard output): a typed record, checked on arrival as the cluster's messages are."""
import dataclasses
import json
import typing

from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.records import Record

__all__ = ["BEAT_SECONDS", "Event", "KINDS", "LaunchError", "SILENT_SECONDS"]

KINDS = ("ready", "error", "exited")
# After its hello, the launcher writes an empty line to each agent every BEAT_SECONDS; an agent that hears
# nothing for SILENT_SECONDS stops its host's part: with the network cut, its input would not close until TCP's
# keepalive (two hours by default), and its processes would live on that long
BEAT_SECONDS = 5.0
SILENT_SECONDS = 30.0


class LaunchError(errors.Error, RuntimeError):
    """A cluster could not be started, or lost a host: the message names the host and the fix."""


@dataclasses.dataclass
class Event(Record):
    """``ready``: the host's ``roles`` are started (their ``pids``); ``error``: the host could not
    start them (``message`` says why and the fix); ``exited``: a ``role`` exited with ``code`` (its
    last lines in ``message``), and the agent stops the host's others."""

    WHAT: typing.ClassVar[str] = "agent event"
    kind: str
    host: str
    roles: typing.Optional[list] = None
    pids: typing.Optional[dict] = None
    role: typing.Optional[str] = None
    code: typing.Optional[int] = None
    message: typing.Optional[str] = None

    def check(self):
        if self.kind not in KINDS:
            raise ValueError(f"agent event: kind must be one of {KINDS}, got {self.kind!r}")
        if self.message is not None:
            self.message = self.message[:8000]

    def to_line(self):
        """The event as one line of JSON."""
        return json.dumps(self.to_wire()) + "\n"

    @classmethod
    def from_line(cls, line):
        """An event from one line of an agent's output; ValueError if the line is not one."""
        try:
            msg = json.loads(line)
        except ValueError:
            raise ValueError(f"not an agent event: {line[:200]!r}") from None
        return cls.from_wire(msg)
