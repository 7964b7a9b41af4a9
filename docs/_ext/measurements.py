"""A Sphinx directive that renders a benchmark's JSON output as a table, with its command and date.

Every measurement in the docs comes from a file under ``docs/measurements/`` written by a
benchmark's ``--json`` output (or several of them, gathered under one file with their commands).
A table is never typed by hand::

    .. measurements:: measurements/scaling-shards-cbow-devmix-2026-11-24.json
       :rows: runs/default interval, one shard per worker (P = K)/result/runs
       :where: sg=0

       K                          | {K}
       bytes up / down per word   | {bytes_up_per_word:.0f} / {bytes_down_per_word:.0f}

Several files may be named: their records are put together, and each file's provenance is
printed. ``:rows:`` is a ``/``-separated path to a list of records (or a mapping: its values, each
with its key as ``_key``; with ``:single:``, the one record it leads to); a ``*`` in it takes
every entry there (the keys it took are ``_path``, the last one's entry ``_entry``); each content line is ``header | template``, the template in
:meth:`str.format` syntax over a record's fields (``{a.b}`` and ``{a[key]}`` reach into a nested mapping, a key
in brackets may hold a colon; a missing or null field prints as an empty cell, and a column no
record fills is an error (a misspelt field); ``{=a / b * 100:.1f}`` computes, with + - * /
over fields); ``:where:`` keeps the records whose fields equal
the given values (``field=a|b & other=c``); ``:transpose:`` puts the records in columns. Under the table the directive
prints the date and the command that produced it: the nearest ``date`` and ``command`` (or
``provenance``'s) on the rows' path, or the records' own ``provenance``, or the options of those
names. A file without either is
an error, so a figure cannot lose where it came from.
"""
import ast
import json
import math
import operator
import os
import string

import _string

from docutils import nodes
from docutils.parsers.rst import Directive, directives


class Missing:
    """A field a record lacks: formats as an empty cell whatever the spec."""

    def __format__(self, spec):
        return ""

    def __getattr__(self, name):
        return self

    def __getitem__(self, key):
        return self


class Record:
    """Attribute access to a nested mapping, so that ``{quality_delta.analogy:+.3f}`` works."""

    def __init__(self, data):
        self._data = data

    def __getattr__(self, name):
        value = self._data.get(name) if isinstance(self._data, dict) else None
        return wrap(value)

    def __getitem__(self, key):
        return self.__getattr__(str(key))

    def __format__(self, spec):
        return format(json.dumps(self._data), spec)


def wrap(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Missing()
    if isinstance(value, dict):
        return Record(value)
    return value


OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.USub: operator.neg}


def evaluate(node, record):
    """Arithmetic over a record's fields (``=a / b * 100``): names, dotted names, numbers and
    + - * /; a missing field makes the whole value missing."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body, record)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        value = record.get(node.id)
    elif isinstance(node, ast.Attribute):
        value = evaluate(node.value, record)
        value = value.get(node.attr) if isinstance(value, dict) else None
        return value
    elif isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = evaluate(node.left, record), evaluate(node.right, record)
        if left is None or right is None:
            return None
        return OPERATORS[type(node.op)](left, right)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
        value = evaluate(node.operand, record)
        return None if value is None else OPERATORS[type(node.op)](value)
    else:
        raise ValueError(f"not allowed in a column's expression: {ast.dump(node)[:80]}")
    return value


class Formatter(string.Formatter):
    """:meth:`str.format` over a record: dotted and computed fields; a cell whose every field is
    missing is empty (not its separators)."""

    def cell(self, template, record):
        self.found = self.fields = 0
        text = self.format(template, **record)
        return text if self.found or not self.fields else ""

    def get_field(self, field_name, args, kwargs):
        value, key = self._get_field(field_name, kwargs)
        self.fields += 1
        self.found += not isinstance(value, Missing)
        return value, key

    def _get_field(self, field_name, kwargs):
        if field_name.startswith("="):
            value = evaluate(ast.parse(field_name[1:].strip(), mode="eval"), kwargs)
            return wrap(value), field_name
        first, rest = _string.formatter_field_name_split(field_name)  # a.b and a[key] (a key may hold ':')
        value = wrap(kwargs.get(first))  # a missing field is an empty cell
        for _is_attr, part in rest:
            value = value[str(part)] if isinstance(value, (Record, Missing)) else Missing()
        return value, first


def walk(data, path):
    """``[(value, mappings passed on the way, keys the wildcards took)]`` at ``path`` (``a/b/c``;
    a ``*`` part takes every value of a mapping or list there)."""
    found = [(data, [data], [])]
    for part in [p for p in path.split("/") if p]:
        step = []
        for value, seen, keys in found:
            if part == "*":
                items = value.items() if isinstance(value, dict) else enumerate(value)
                step += [(v, seen + [v], keys + [(str(k), v)]) for k, v in items]
            elif isinstance(value, list):
                step.append((value[int(part)], seen + [value[int(part)]], keys))
            elif isinstance(value, dict) and part in value:
                step.append((value[part], seen + [value[part]], keys))
            else:
                raise KeyError(f"no {part!r} in the path {path!r}")
        found = step
    return found


def nearest(seen, key):
    for data in reversed(seen):
        if isinstance(data, dict):
            if key in data and isinstance(data[key], (str, list)):
                return data[key]
            provenance = data.get("provenance")
            if isinstance(provenance, dict) and key in provenance:
                return provenance[key]
    return None


def matches(record, where):
    """Whether ``record``'s fields equal the values of every ``field=value`` condition (``a|b``:
    either)."""
    for condition in where:
        key, _, value = condition.partition("=")
        field = record
        for part in key.strip().split("."):
            field = field.get(part) if isinstance(field, dict) else None
        if str(field) not in [v.strip() for v in value.split("|")]:
            return False
    return True


class MeasurementsDirective(Directive):
    required_arguments = 1
    has_content = True
    optional_arguments = 8
    option_spec = {"rows": directives.unchanged, "where": directives.unchanged, "transpose": directives.flag,
                   "single": directives.flag,
                   "command": directives.unchanged, "date": directives.unchanged, "caption": directives.unchanged}

    def run(self):
        env = self.state.document.settings.env
        rows = []
        for argument in self.arguments:
            relative, path = env.relfn2path(argument)
            env.note_dependency(relative)
            try:
                with open(path, encoding="utf-8") as fin:
                    data = json.load(fin)
                paths = walk(data, self.options.get("rows", ""))
            except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
                raise self.error(f"measurements: {argument}: {err}")
            for value, seen, keys in paths:
                if "single" in self.options:
                    value = [value]
                elif isinstance(value, dict):
                    value = [dict(v, _key=k) if isinstance(v, dict) else v for k, v in value.items()]
                if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
                    raise self.error(f"measurements: {argument}: the rows' path does not lead to records")
                date, command = nearest(seen, "date"), nearest(seen, "command")
                for record in value:
                    own = record.get("provenance") if isinstance(record.get("provenance"), dict) else {}
                    extra = {"_source": relative, "_date": self.options.get("date") or date or own.get("date"),
                             "_command": self.options.get("command") or command or own.get("command")}
                    if keys:  # what the wildcards took: their keys, and the last one's entry
                        extra.update(_path="/".join(k for k, _v in keys), _entry=keys[-1][1])
                    rows.append(dict(record, **extra))
        where = [c for c in self.options.get("where", "").split("&") if c.strip()]
        rows = [r for r in rows if matches(r, where)]
        if not rows:
            raise self.error(f"measurements: {self.arguments}: no record matches {where}")
        sources = {}
        for record in rows:  # the provenance of the records shown, file by file
            if not record["_date"] or not record["_command"]:
                raise self.error(f"measurements: {record['_source']} names no "
                                 f"{'date' if not record['_date'] else 'command'}: add it to the file, or give "
                                 f"the :date: / :command: option")
            dates, commands = sources.setdefault(record["_source"], ([], []))
            dates.append(str(record["_date"])[:10])
            for command in record["_command"] if isinstance(record["_command"], list) else [record["_command"]]:
                if command not in commands:
                    commands.append(command)
        columns = []
        for line in self.content:
            if not line.strip():
                continue
            header, sep, template = line.partition("|")
            if not sep:
                raise self.error(f"measurements: a column is 'header | template', not {line!r}")
            columns.append((header.strip(), template.strip()))
        if not columns:
            raise self.error("measurements: no columns")
        formatter = Formatter()
        try:
            cells = [[formatter.cell(template, record) for _h, template in columns] for record in rows]
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, ZeroDivisionError) as err:
            raise self.error(f"measurements: {self.arguments}: {err}")
        headers = [header for header, _t in columns]
        empty = [header for i, header in enumerate(headers) if not any(row[i] for row in cells)]
        if empty:  # a template whose fields no record has: a misspelt field, not a measurement
            raise self.error(f"measurements: {self.arguments}: no record fills the column(s) {empty}")
        if "transpose" in self.options:
            table = [[headers[0]] + [row[0] for row in cells]] + \
                    [[headers[i]] + [row[i] for row in cells] for i in range(1, len(headers))]
        else:
            table = [headers] + cells
        return [self.table(table)] + [self.provenance(max(dates), commands, source)
                                      for source, (dates, commands) in sources.items()]

    def table(self, rows):
        width = len(rows[0])
        table = nodes.table(classes=["measurements"])
        group = nodes.tgroup(cols=width)
        table += group
        for column in range(width):
            group += nodes.colspec(colwidth=max(len(str(row[column])) for row in rows) + 2)
        head, body = nodes.thead(), nodes.tbody()
        group += head
        group += body
        for index, row in enumerate(rows):
            line = nodes.row()
            for cell in row:
                entry = nodes.entry()
                entry += nodes.paragraph(text=str(cell))
                line += entry
            (head if index == 0 else body).append(line)
        if "caption" in self.options:
            title = nodes.title(text=self.options["caption"])
            table.insert(0, title)
        return table

    def provenance(self, date, commands, relative):
        para = nodes.paragraph(classes=["measurements-provenance"])
        para += nodes.emphasis(text=f"Measured {date} ({os.path.basename(relative)}) with: ")
        for index, command in enumerate(commands):
            if index:
                para += nodes.Text("; ")
            para += nodes.literal(text=command)
        return para


def setup(app):
    app.add_directive("measurements", MeasurementsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
