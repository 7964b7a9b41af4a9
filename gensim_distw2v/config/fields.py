"""Options declared once: each field of a frozen dataclass carries its default, its help and its check.

:func:`option` declares a field: its default, a one-line help (what it is, its units) and a
:class:`Check` (the values it allows, how a value is normalised). A class of such fields derives
from :class:`Declared`, which checks every value where the object is built (a ``ValueError``
naming the option, what it is, what is allowed and the value given). Everything else is generated
from the fields: the command line's options (:func:`add_arguments`, :meth:`Declared.from_args`),
numpydoc text (:func:`numpydoc`) and the docs' tables (:func:`rst_table`). No default, help line
or range is written twice.

A leaf: it imports nothing of this package (``settings`` and ``options`` build on it).
"""
import argparse
import dataclasses
import difflib
import math
import numbers
import os
import textwrap

import numpy as np

__all__ = ["Check", "Choice", "Count", "Declared", "Flag", "Folder", "Real", "Text", "add_arguments",
           "check_keywords", "describe", "flag", "help_line", "numpydoc", "option", "rst_table"]

_REFUSED = object()  # what Check.normalise returns for a value it does not allow


def _what(label, what):
    """The end of a refusal: what the option is."""
    return f". {label}: {what}" if what else ""


def _number(x):
    """``x`` as the docs and messages write it: 1e7 as 10000000, 0.5 as 0.5."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return str(x)


class Check:
    """The values an option allows, and how a given value is normalised; a subclass per kind.

    Parameters
    ----------
    optional : bool
        None is allowed too (it then means what the option's help says).
    """

    type_doc = "object"  # the numpydoc type

    def __init__(self, optional=False):
        self.optional = optional

    def allowed(self):
        """What is allowed, as the end of "NAME must be ..."."""
        raise NotImplementedError

    def normalise(self, value, label):
        """``value`` normalised, or ``_REFUSED`` (a subclass may raise its own ``ValueError``)."""
        raise NotImplementedError

    def cli(self):
        """argparse's keywords for this kind of value."""
        return {}

    def describe(self):
        """What is allowed, for the help: ``allowed()``, and None if it is."""
        return self.allowed() + (", or None" if self.optional else "")

    def __call__(self, value, label, what=""):
        """``value`` checked and normalised; ``ValueError`` naming ``label`` and what is allowed otherwise."""
        if value is None and self.optional:
            return None
        result = self.normalise(value, label)
        if result is _REFUSED:
            raise ValueError(self.refusal(label, value, what))
        return result

    def refusal(self, label, value, what):
        return f"{label} must be {self.allowed()}, got {value!r}" + _what(label, what)


class Count(Check):
    """An int in ``[low, high]`` (``high`` None: no upper bound)."""

    type_doc = "int"

    def __init__(self, low=None, high=None, optional=False):
        super().__init__(optional)
        self.low, self.high = low, high

    def allowed(self):
        if self.high is None:
            return "a positive int" if self.low == 1 else f"an int >= {self.low}"
        return f"an int in [{self.low}, {self.high}]"

    def normalise(self, value, label):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return _REFUSED
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return _REFUSED
        return int(value)

    def cli(self):
        return {"type": int, "metavar": "N"}


class Real(Check):
    """A number in an interval (``low_open`` / ``high_open``: the bound itself excluded), in ``unit``."""

    type_doc = "float"

    def __init__(self, low, high=math.inf, low_open=False, high_open=False, unit=None, optional=False):
        super().__init__(optional)
        self.low, self.high, self.low_open, self.high_open, self.unit = low, high, low_open, high_open, unit

    def allowed(self):
        unit = f" {self.unit}" if self.unit else ""
        if self.low == 0 and self.low_open and self.high == math.inf:
            return f"a positive number{' of' + unit if unit else ''}"
        low, high = "(" if self.low_open else "[", ")" if self.high_open or self.high == math.inf else "]"
        return f"in {low}{_number(self.low)}, {_number(self.high)}{high}{unit}"

    def normalise(self, value, label):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return _REFUSED
        value = float(value)
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open or self.high == math.inf else value <= self.high
        return value if above and below else _REFUSED  # NaN: neither

    def cli(self):
        return {"type": float, "metavar": (self.unit or "x").upper()}


class Choice(Check):
    """One of ``options``, after ``normalise`` (e.g. a numpy dtype to its name).

    ``noun`` words the refusal as "unknown NOUN 'x'; choose one of ..."; ``cli_type`` is applied to
    the command line's text first (e.g. ``str.upper``).
    """

    def __init__(self, options, noun=None, normalise=None, cli_type=None, optional=False):
        super().__init__(optional)
        self.options, self.noun, self.fix, self.cli_type = tuple(options), noun, normalise, cli_type
        self.type_doc = "{" + ", ".join(repr(o) for o in self.options) + "}"

    def allowed(self):
        return f"one of {self.options}"

    def normalise(self, value, label):
        try:
            value = self.fix(value) if self.fix is not None else value
        except (TypeError, ValueError, AttributeError):
            return _REFUSED
        return value if isinstance(value, str) and value in self.options else _REFUSED

    def refusal(self, label, value, what):
        if self.noun is None:
            return super().refusal(label, value, what)
        return f"unknown {self.noun} {value!r}; choose one of {self.options}" + _what(label, what)

    def cli(self):
        return {"choices": self.options, **({"type": self.cli_type} if self.cli_type else {})}


class Folder(Check):
    """A folder's path (None: none), made absolute; refused if something else is there."""

    type_doc = "str"

    def __init__(self):
        super().__init__(True)

    def allowed(self):
        return "a folder's path"

    def normalise(self, value, label):
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            return _REFUSED
        path = os.path.abspath(os.fspath(value))
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"{label} {path} exists and is not a folder")
        return path

    def cli(self):
        return {"metavar": "DIR"}


class Flag(Check):
    """True or False."""

    type_doc = "bool"

    def allowed(self):
        return "True or False"

    def normalise(self, value, label):
        return bool(value) if isinstance(value, (bool, np.bool_)) else _REFUSED

    def cli(self):
        return {"action": argparse.BooleanOptionalAction}


class Text(Check):
    """A non-empty str (an address, a file's path)."""

    type_doc = "str"

    def __init__(self, metavar="TEXT", optional=False):
        super().__init__(optional)
        self.metavar = metavar

    def allowed(self):
        return "a non-empty str"

    def describe(self):
        return ""  # what the help says is enough

    def normalise(self, value, label):
        return value if isinstance(value, str) and value else _REFUSED

    def cli(self):
        return {"metavar": self.metavar}


def option(default, help, check, doc=None, group=None, flags=(), role=False):  # noqa: A002 - argparse's word
    """A declared field.

    Parameters
    ----------
    default
        Its default (written here only).
    help : str
        One line, lower case, no final stop: what it is and its units (the allowed values are
        added from ``check``).
    check : Check
        The values allowed, and how one is normalised.
    doc : str, optional
        More, for the docstrings and the docs (reStructuredText).
    group : str, optional
        The docs' section it is listed in.
    flags : tuple of str
        Extra command-line flags (``-n``) besides ``--the-name``.
    role : bool
        A keyword of the role's constructor too (daemon options).
    """
    return dataclasses.field(default=default, metadata={"help": help, "check": check, "doc": doc, "group": group,
                                                        "flags": tuple(flags), "role": role})


def flag(name):
    """The command line's flag of field ``name``: ``--max-model-bytes``."""
    return "--" + name.replace("_", "-")


class Declared:
    """Base of a frozen dataclass of :func:`option` fields: each value checked and normalised where
    the object is built."""

    FLAGS = False  # errors name the options as flags (--heartbeat): they come from a command line

    def __post_init__(self):
        for field in dataclasses.fields(self):
            meta = field.metadata
            value = meta["check"](getattr(self, field.name), self.label(field.name), meta["help"])
            object.__setattr__(self, field.name, value)  # frozen: the normalised value replaces the given one

    @classmethod
    def label(cls, name):
        """How errors name the field ``name``."""
        return flag(name) if cls.FLAGS else name

    @classmethod
    def names(cls):
        """The fields' names."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def check(cls, name, value):
        """``value`` checked and normalised as field ``name``'s."""
        meta = cls.__dataclass_fields__[name].metadata
        return meta["check"](value, cls.label(name), meta["help"])

    def replace(self, **changes):
        """A copy with ``changes``, checked."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_args(cls, args):
        """The object that :func:`add_arguments`'s options parsed into ``args`` give, checked."""
        return cls(**{name: getattr(args, name) for name in cls.names()})

    def role_kwargs(self):
        """The values of the fields declared ``role=True``: the role's constructor's keywords."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.metadata["role"]}


def help_line(field):
    """A field's one-line help, with what it allows."""
    meta = field.metadata
    allowed = meta["check"].describe()
    return f"{meta['help']}; {allowed}" if allowed else meta["help"]


def add_arguments(parser, cls):
    """Add an option per field of ``cls`` to ``parser`` (or an argument group): ``--field-name``, the
    field's default, type or choices, and its help line."""
    for field in dataclasses.fields(cls):
        check = field.metadata["check"]
        parser.add_argument(*field.metadata["flags"], flag(field.name), dest=field.name, default=field.default,
                            help=help_line(field).replace("%", "%%"), **check.cli())


def check_keywords(given, valid, what):
    """``TypeError`` naming the first of ``given`` not in ``valid``, and the closest valid name."""
    for name in given:
        if name not in valid:
            closest = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.0)
            raise TypeError(f"{what} got an unexpected keyword argument {name!r}; the closest valid name is "
                            f"{closest[0]!r}" if closest else f"{what} takes no keyword argument {name!r}")


def _wrap(text, indent, width=100):
    return textwrap.fill(text, width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def _sentence(text):
    return text[:1].upper() + text[1:]


def describe(field):
    """A field's text for docstrings and the docs: its help, what it allows, and its ``doc``."""
    text = f"{_sentence(help_line(field))}."
    return text + (f" {field.metadata['doc']}" if field.metadata["doc"] else "")


def numpydoc(cls, indent="    "):
    """The numpydoc ``Parameters`` entries of ``cls``'s fields (each with its type and default)."""
    lines = []
    for field in dataclasses.fields(cls):
        lines.append(f"{indent}{field.name} : {field.metadata['check'].type_doc}, optional")
        lines.append(_wrap(f"{describe(field)} Default: ``{field.default!r}``.", indent + "    "))
    return "\n".join(lines) + "\n"


def rst_table(cls, group=None, beyond=None):
    """reStructuredText lines of a ``list-table`` of ``cls``'s fields: those of ``group`` (None: all),
    less those of the class ``beyond``. A row per field: its name (a keyword; for a class of command-line
    options, its flags), its default, its flag, and what it is (:func:`describe`)."""
    skip = set(beyond.names()) if beyond is not None else set()
    chosen = [f for f in dataclasses.fields(cls) if f.name not in skip and group in (None, f.metadata["group"])]
    if not chosen:
        raise ValueError(f"{cls.__name__} has no field in group {group!r}")
    rows = [["option", "default", "what it is"] if cls.FLAGS else ["setting", "default", "command line", "what it is"]]
    for field in chosen:
        flags = ", ".join(f"``{f}``" for f in (*field.metadata["flags"], flag(field.name)))
        name = [flags] if cls.FLAGS else [f"``{field.name}``", flags]
        rows.append(name[:1] + [f"``{field.default!r}``"] + name[1:] + [describe(field)])
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: " + ("22 10 68" if cls.FLAGS else "16 10 18 56"), ""]
    for row in rows:
        lines += [f"   * - {row[0]}"] + [f"     - {cell}" for cell in row[1:]]
    return lines
