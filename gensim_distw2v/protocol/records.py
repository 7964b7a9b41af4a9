"""Messages as named, typed records: each defined once, with its validation beside it.

``to_wire()`` gives the plain dict that travels; ``from_wire(msg)`` checks every field's type (and
refuses unknown ones; a field with a default, added later, may be left out), then the record's own
``check()``; both sides use the same class.
"""
import dataclasses
import functools
import types
import typing

import numpy as np

from gensim_distw2v.protocol.arrays import need, pack_array, unpack_array


# ---------------------------------------------------------------------------------------------- records
# Messages as named, typed records: each is defined once here, with its validation beside it.
# ``to_wire()`` gives the plain dict that travels; ``from_wire(msg)`` checks every field's type (and
# refuses unknown ones; a field with a default, added later, may be left out), then the record's own
# ``check()``; both sides use the same class.

def _kind(annotation):
    """The type(s) :func:`need` checks for a field's annotation (``Optional[X]`` allows None)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_kind(a) if a is not type(None) else type(None) for a in typing.get_args(annotation))
    if annotation is list:
        return (list, tuple)
    return annotation


@functools.lru_cache(maxsize=None)
def _hints(cls):
    """A record's fields' annotations, names of records defined further down resolved."""
    return typing.get_type_hints(cls)


def _flat(kinds):
    out = []
    for kind in kinds if isinstance(kinds, tuple) else (kinds,):
        out.extend(_flat(kind) if isinstance(kind, tuple) else [kind])
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _specs(cls):
    """Per field of a record, what :meth:`Record.from_wire` checks: ``(name, the type(s) for
    :func:`need`, whether None is allowed, the nested record class or None, the default or
    _REQUIRED)``, and the set of names; worked out once per class (it runs for every message)."""
    hints, out = _hints(cls), []
    for field in dataclasses.fields(cls):
        kind = _flat(_kind(hints[field.name]))
        optional = type(None) in kind
        kind = tuple(k for k in kind if k is not type(None))
        # a record, or another typed value that checks itself from plain data (the Settings)
        nested = kind[0] if isinstance(kind[0], type) and hasattr(kind[0], "from_wire") else None
        default = field.default if field.default is not dataclasses.MISSING else _REQUIRED
        out.append((field.name, dict if nested else kind if len(kind) > 1 else kind[0], optional, nested, default))
    return tuple(out), frozenset(name for name, *_ in out)


_REQUIRED = object()  # a field without a default: a message must carry it


@dataclasses.dataclass
class Record:
    """A message with named, typed fields (subclasses are dataclasses; see :meth:`from_wire`)."""

    WHAT: typing.ClassVar[str] = "message"

    @classmethod
    def from_wire(cls, msg, **context):
        """Check a message from a peer and return it as a record.

        Raises
        ------
        ValueError
            Not a dict, a missing, unknown or mistyped field, or what :meth:`check` refuses.
        """
        if not isinstance(msg, dict):
            raise ValueError(f"malformed {cls.WHAT}: expected a dict, got {type(msg).__name__}")
        specs, names = _specs(cls)
        if not names.issuperset(msg):
            unknown = set(msg) - names
            raise ValueError(f"malformed {cls.WHAT}: unknown fields {sorted(map(str, unknown))}")
        values = {}
        for name, kind, optional, nested, default in specs:
            if optional and msg.get(name, 0) is None:
                values[name] = None
                continue
            if name not in msg and default is not _REQUIRED:  # a field added with a default
                values[name] = default
                continue
            value = need(msg, name, kind, cls.WHAT)
            values[name] = nested.from_wire(value) if nested else value
        record = cls(**values)
        record.check(**context)
        return record

    def check(self, **context):
        """Checks beyond the fields' types (ranges, consistency); raise ValueError naming the problem."""

    @classmethod
    def names(cls):
        """Its fields' names, in order."""
        return [field.name for field in dataclasses.fields(cls)]

    def to_wire(self):
        """The record as plain data for the wire (records and settings inside it too, arrays packed)."""
        return {name: _plain(getattr(self, name)) for name, *_ in _specs(type(self))[0]}


_PLAIN = frozenset((type(None), int, float, str, bytes, bool, memoryview, list))


def _plain(value):
    """A field's value as plain data: records (and anything with ``to_wire``) and arrays converted,
    in dicts too."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, (int, float, str, bytes, bool, memoryview)):
        return value
    if hasattr(value, "to_wire"):
        return value.to_wire()
    if isinstance(value, np.ndarray):
        return pack_array(value)
    if isinstance(value, dict):
        return {key: v if type(v) in _PLAIN else _plain(v) for key, v in value.items()}
    return value


def _record_map(mapping, cls):
    """``{str key: cls record}`` from a field that maps names to records (as built, or as plain
    data from the wire, checked)."""
    return {str(key): value if isinstance(value, cls) else cls.from_wire(value) for key, value in mapping.items()}


def _check_array(record, name, dtype, ndim=None, shape=None):
    """Replace ``record.name`` (an array message, or an array) by the checked, read-only array."""
    value = getattr(record, name)
    value = pack_array(value) if isinstance(value, np.ndarray) else value
    setattr(record, name, unpack_array(value, f"{record.WHAT} {name}", dtype, ndim=ndim, shape=shape))
    return getattr(record, name)


def _non_negative(record, *names):
    for name in names:
        if getattr(record, name) < 0:
            raise ValueError(f"malformed {record.WHAT}: {name} must be >= 0, got {getattr(record, name)}")
