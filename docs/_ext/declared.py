"""A Sphinx directive that renders the table of a class of declared options (settings or a daemon's).

The rows are generated from the fields of the installed package's class (their defaults, help and
checks: :mod:`gensim_distw2v.config.fields`), never typed by hand::

    .. declared:: gensim_distw2v.config.settings.Settings
       :group: merging

    .. declared:: gensim_distw2v.options.DispatcherOptions
       :beyond: gensim_distw2v.options.ServerOptions

``:group:`` keeps the fields of one group; ``:beyond:`` drops the fields of another class (the
options a role shares with the others, listed once).
"""
import importlib

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList


def find(path):
    """The object at the dotted ``path`` (``package.module.Class``)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


class Declared(Directive):
    required_arguments = 1
    option_spec = {"group": directives.unchanged, "beyond": directives.unchanged}

    def run(self):
        from gensim_distw2v.config import fields

        try:
            cls = find(self.arguments[0])
            beyond = find(self.options["beyond"]) if "beyond" in self.options else None
            lines = fields.rst_table(cls, group=self.options.get("group"), beyond=beyond)
        except (ImportError, AttributeError, ValueError) as err:
            raise self.error(f"declared:: {self.arguments[0]}: {err}") from None
        source = self.state_machine.get_source_and_line(self.lineno)[0]
        container = nodes.container(classes=["declared-options"])
        self.state.nested_parse(StringList(lines, source=source), self.content_offset, container)
        return [container]


def setup(app):
    app.add_directive("declared", Declared)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
