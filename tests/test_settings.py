"""Settings and the daemons' options are declared once (gensim_distw2v.config.fields): every keyword,
attribute, docstring entry, command-line option and docs row is generated from the declaration,
with the declaration's default, and nothing else repeats it."""
import argparse
import dataclasses
import inspect
import math
import os
import re

import pytest
from numpydoc.docscrape import NumpyDocString

from gensim_distw2v import Word2Vec, options
from gensim_distw2v.config import fields
from gensim_distw2v import __main__ as cli
from gensim_distw2v import nameserver
from gensim_distw2v.dispatcher import daemon as dispatcher_daemon
from gensim_distw2v.dispatcher.service import Dispatcher
from gensim_distw2v.io import keys, transport
from gensim_distw2v.config.settings import Settings
from gensim_distw2v.shard import daemon as shard_daemon
from gensim_distw2v.shard.service import Shard
from gensim_distw2v.worker import daemon as worker_daemon
from gensim_distw2v.worker.service import Worker

pytestmark = pytest.mark.unit

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(fields.__file__)))  # (fields is in config/)
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
SETTINGS = dataclasses.fields(Settings)
ROLES = [  # (the daemon's module, its options, the role it constructs)
    (dispatcher_daemon, options.DispatcherOptions, Dispatcher),
    (shard_daemon, options.ShardOptions, Shard),
    (worker_daemon, options.WorkerOptions, Worker),
    (nameserver, options.NameServerOptions, None),
]


def another_value(field, folder):
    """A value ``field`` allows that is not its default (and its command line's text)."""
    check = field.metadata["check"]
    if isinstance(check, fields.Choice):
        value = next(o for o in check.options if o != field.default)
    elif isinstance(check, fields.Count):
        value = next(v for v in (check.low + 1, check.low) if v != field.default)
    elif isinstance(check, fields.Real):
        value = check.low + 0.5 if check.high == math.inf else (check.low + check.high) / 2
    elif isinstance(check, fields.Folder):
        value = str(folder / field.name)
    elif isinstance(check, fields.Flag):
        return not field.default, [f"--{'no-' if field.default else ''}{field.name.replace('_', '-')}"]
    else:
        value = field.name + "-x"
    return value, [fields.flag(field.name), str(value)]


def actions(parser):
    """``parser``'s options by destination (the help aside)."""
    return {a.dest: a for a in parser._actions if not isinstance(a, argparse._HelpAction)}


def train_parser():
    subparsers = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices["train"]


def test_every_setting_is_a_keyword_of_word2vec_with_its_default_and_an_attribute(tmp_path):
    signature = inspect.signature(Word2Vec).parameters
    for field in SETTINGS:
        assert signature[field.name].default == field.default, field.name
        assert signature[field.name].kind is inspect.Parameter.KEYWORD_ONLY
        assert isinstance(inspect.getattr_static(Word2Vec, field.name), property), field.name
        value, _argv = another_value(field, tmp_path)
        model = Word2Vec(distributed=True, **{field.name: value})
        assert getattr(model.settings, field.name) == value == getattr(model, field.name)
        model = Word2Vec(distributed=True)
        setattr(model, field.name, value)  # the attribute replaces the setting
        assert getattr(model.settings, field.name) == value
    assert Word2Vec().settings == Settings()  # the keywords' defaults are the fields'
    # gensim's arguments keep their places (positional as gensim's)
    gensim_params = list(inspect.signature(Word2Vec.__mro__[1]).parameters)
    assert list(signature)[:len(gensim_params)] == gensim_params


def test_an_unknown_keyword_is_refused_naming_the_closest_valid_one():
    with pytest.raises(TypeError, match="unexpected keyword argument 'sync_word'; the closest valid name is "
                                        "'sync_words'"):
        Word2Vec(distributed=True, sync_word=5000)
    with pytest.raises(TypeError, match="'vector_sise'; the closest valid name is 'vector_size'"):
        Word2Vec(vector_sise=5)
    with pytest.raises(TypeError, match="'merge_dtyp'; the closest valid name is 'merge_dtype'"):
        Word2Vec(merge_dtyp="int8")


def test_the_docstring_documents_every_setting_from_its_declaration():
    parameters = {p.name: p for p in NumpyDocString(Word2Vec.__doc__)["Parameters"]}
    documented = {p.name for p in NumpyDocString(Settings.__doc__)["Parameters"]}
    assert documented == set(Settings.names())
    for field in SETTINGS:
        entry = parameters[field.name]
        text = " ".join(entry.desc)
        assert entry.type == field.metadata["check"].type_doc + ", optional"
        assert " ".join(field.metadata["help"].split())[1:] in text, field.name  # (capitalised)
        assert text.endswith(f"Default: ``{field.default!r}``."), field.name
        assert getattr(Word2Vec, field.name).__doc__.startswith(fields.describe(field)), field.name


def test_every_setting_is_a_train_option_with_the_same_default(tmp_path):
    parser = train_parser()
    found = actions(parser)
    for field in SETTINGS:
        action = found[field.name]
        assert fields.flag(field.name) in action.option_strings
        assert action.default == field.default, field.name
        check = field.metadata["check"]
        if isinstance(check, fields.Choice):
            assert tuple(action.choices) == check.options
        value, argv = another_value(field, tmp_path)
        args = parser.parse_args(["corpus.txt", "--output", "m", *argv])
        assert Settings.check(field.name, getattr(args, field.name)) == value, field.name
    args = parser.parse_args(["corpus.txt", "--output", "m"])
    assert Settings(**{name: getattr(args, name) for name in Settings.names()}) == Settings()


def test_the_docs_table_lists_every_setting_and_no_page_types_a_default():
    with open(os.path.join(DOCS, "settings.rst"), encoding="utf-8") as fin:
        page = fin.read()
    groups = re.findall(r"\.\. declared:: gensim_distw2v\.config\.settings\.Settings\n   :group: (\w+)", page)
    assert sorted(groups) == sorted({f.metadata["group"] for f in SETTINGS}), groups
    rows = "\n".join(line for group in groups for line in fields.rst_table(Settings, group=group))
    for field in SETTINGS:
        assert rows.count(f"   * - ``{field.name}``\n     - ``{field.default!r}``\n     - "
                          f"``{fields.flag(field.name)}``") == 1, field.name
        assert not re.search(rf"^``{field.name}`` \(", page, re.M), f"settings.rst types {field.name}'s default"
    for cls in (options.ServerOptions, options.DispatcherOptions, options.ShardOptions, options.WorkerOptions,
                options.NameServerOptions):
        assert f".. declared:: gensim_distw2v.options.{cls.__name__}" in page
        assert f"``{fields.flag(cls.names()[-1])}``" in "\n".join(fields.rst_table(cls))


def read(*path):
    with open(os.path.join(PACKAGE, *path), encoding="utf-8") as fin:
        return fin.read()


def test_no_module_repeats_a_settings_default():
    for name in ("model.py", "__main__.py"):
        source = read(name)
        for field in SETTINGS:
            literal = re.search(rf"\b{field.name}=(None|True|False|[-\d.]+|'[^']*'|\"[^\"]*\")", source)
            assert literal is None, f"{name} repeats {field.name}'s default: {literal.group(0)}"
        for constant in ("HOLD_BACK", "COLD_EVERY", "MERGE_DTYPE", "CHECKPOINT_EVERY", "TENSORBOARD_WORDS",
                         "PART_BYTES", "MERGE_RULES", "SYNC_MODES", "DELTA_DTYPES"):
            assert constant not in source, f"{name} uses {constant}: take it from the Settings' fields"
        assert "add_argument(\"--sync-words\"" not in source


@pytest.mark.parametrize("daemon, cls, role", ROLES, ids=[cls.__name__ for _d, cls, _r in ROLES])
def test_each_daemons_command_line_is_its_options_with_their_defaults(daemon, cls, role):
    parser = daemon.build_parser()
    found = actions(parser)
    assert set(found) == set(cls.names()), "an option not declared in gensim_distw2v.options, or one missing"
    for field in dataclasses.fields(cls):
        action = found[field.name]
        negative = ["--no-" + fields.flag(field.name)[2:]] if isinstance(field.metadata["check"], fields.Flag) else []
        assert action.option_strings == [*field.metadata["flags"], fields.flag(field.name), *negative]
        assert action.default == field.default, field.name
        assert field.metadata["help"].replace("%", "%%") in action.help
    assert options.parse(parser, cls, []) == cls()
    source = inspect.getsource(daemon)
    assert "add_argument" not in source and "default=" not in source, f"{daemon.__name__} declares an option itself"
    if role is not None:  # the role's constructor's defaults are the options' (taken from them)
        constructor = inspect.signature(role).parameters
        for name, value in cls().role_kwargs().items():
            assert constructor[name].default == value == cls.__dataclass_fields__[name].default, name
        head = inspect.getsource(role.__init__).split("):\n")[0]
        for name in cls().role_kwargs():
            assert re.search(rf"\b{name}=[-\d.]", head) is None, f"{role.__name__} repeats {name}'s default"


def test_the_servers_common_options_are_declared_once_and_limits_keep_their_defaults():
    common = options.ServerOptions.names()
    for cls in (options.DispatcherOptions, options.ShardOptions, options.WorkerOptions):
        assert issubclass(cls, options.ServerOptions)
        for name in common:  # the very same declaration, not a copy
            assert cls.__dataclass_fields__[name] is options.ServerOptions.__dataclass_fields__[name]
    assert options.ServerOptions().limits() == transport.Limits()
    assert options.NameServerOptions().port == keys.DEFAULT_NS_PORT
    # the limits' ranges agree with the transport's own checks
    for value in (600.0, 0.001):
        assert options.ServerOptions(handshake_timeout=value).limits().handshake_timeout == value
    for value in (600.5, 0):
        with pytest.raises(ValueError, match=r"--handshake-timeout must be in \(0, 600\] seconds"):
            options.ServerOptions(handshake_timeout=value)
        with pytest.raises(ValueError, match="handshake_timeout must be in"):
            transport.Limits(handshake_timeout=value)


@pytest.mark.parametrize("cls, argv, message", [
    (options.WorkerOptions, ["--heartbeat", "10"], r"--heartbeat must be in (0, 5] seconds, got 10.0"),
    (options.WorkerOptions, ["--threads", "0"], "--threads must be a positive int, got 0"),
    (options.ShardOptions, ["--max-model-bytes", "0"], "--max-model-bytes must be a positive int, got 0"),
    (options.DispatcherOptions, ["--job-deadline", "0"], "--job-deadline must be a positive number of seconds"),
    (options.DispatcherOptions, ["--status-port", "70000"], "--status-port must be an int in [0, 65535]"),
    (options.NameServerOptions, ["--log-level", "loud"], "argument --log-level: invalid choice: 'LOUD'"),
])
def test_a_bad_option_exits_naming_it_and_what_it_allows(cls, argv, message, capsys):
    parser = options.parser(cls, "python -m gensim_distw2v.x", "x")
    with pytest.raises(SystemExit) as exited:
        options.parse(parser, cls, argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert options.parse(parser, cls, ["--log-level", "debug"]).log_level == "DEBUG"


def test_a_bad_setting_names_it_what_it_is_and_what_it_allows():
    with pytest.raises(ValueError, match=r"^cold_every must be an int in \[1, 1000\], got 0\. cold_every: the rows "
                                         r"of rare words merge every n-th round"):
        Settings(cold_every=0)
    with pytest.raises(ValueError, match=r"^part_bytes must be an int in \[1024, 67108864\], got 10\."):
        Settings(part_bytes=10)
    with pytest.raises(ValueError, match=r"^checkpoint_every must be in \(0, 10000000\] seconds, got 0\b"):
        Settings(checkpoint_every=0)
    for bad in (float("nan"), True, "1", None):
        with pytest.raises(ValueError, match="hold_back must be in"):
            Settings(hold_back=bad)
