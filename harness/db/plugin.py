"""DB plugins: how the controller finds a system under test by name, and what options it takes.

A *plugin* is what an adapter package publishes so that ``harness run --db NAME`` can build its adapter
without the harness knowing the package: a :class:`DBPlugin` holds the adapter's name, a one-line
summary, the options it declares (:class:`Option`: name, type, default, help) and ``create``, which
builds the adapter (a :class:`harness.db.DB`) from the validated options and the test's
:class:`DBContext`. The harness finds plugins two ways (:func:`load_plugin`):

* by name, through the entry-point group :data:`ENTRY_POINT_GROUP` of any installed distribution, as
  the bundled ``cluster`` and ``etcd`` adapters and a user's own package are registered::

      [project.entry-points."chaos_harness.dbs"]
      mydb = "mydb_harness:plugin"

* by reference, ``package.module:attribute`` for a module on the path, without installing anything.
  The attribute is a :class:`DBPlugin`, or a callable taking no argument that returns a DB adapter (an
  adapter with no options).

Options are given on the command line as ``--db-opt NAME=VALUE`` (repeatable) or through a shortcut flag
the option declares (``--mode raft``), in suites as a table, and in ``test.json`` as JSON. Every value is
parsed and checked here before anything is deployed (:meth:`DBPlugin.resolve`); a bad one is a
:class:`PluginError`, one sentence naming the option and the valid choices (exit 254).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.db import DB
    from nemesis.shell import FakeTime

ENTRY_POINT_GROUP = "chaos_harness.dbs"
"""The entry-point group under which packages register their DB plugins."""

OPTION_TYPES = ("str", "int", "float", "bool", "settings")
"""What an option's values are. ``settings`` is a table of ``NAME=VALUE`` pairs (each VALUE JSON where it
parses, else text), given one pair per ``--db-opt NAME=KEY=VALUE`` or shortcut flag."""

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class PluginError(ValueError):
    """A DB cannot be loaded, or an option is unknown or ill-typed: one sentence, exit 254."""


@dataclass(frozen=True)
class Option:
    """One option a DB adapter takes.

    ``repeatable``: the option holds a list, one value per ``--db-opt`` (``bug``: several known bugs).
    ``choices``: the values allowed (for a repeatable option, each element's). ``minimum``/``maximum``
    bound numbers. ``flag``: a command-line shortcut (``--mode``) besides ``--db-opt NAME=VALUE``.
    ``in_name``: a value that differs from the default names the test (``cluster-raft-register-...``).
    """

    name: str
    help: str
    type: str = "str"
    default: Any = None
    choices: tuple[Any, ...] = ()
    repeatable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    flag: str | None = None
    in_name: bool = False

    def __post_init__(self) -> None:
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option {self.name}: type must be one of {', '.join(OPTION_TYPES)}, not {self.type!r}")
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise ValueError(f"option name {self.name!r} must be letters, digits, '-' and '_'")
        if self.flag is not None and not self.flag.startswith("--"):
            raise ValueError(f"option {self.name}: a flag starts with '--', not {self.flag!r}")
        object.__setattr__(self, "choices", tuple(self.choices))

    @property
    def empty(self) -> Any:
        """The value when nothing is given and there is no default: ``[]``, ``{}`` or ``None``."""
        if self.default is not None:
            return self.default
        return [] if self.repeatable else {} if self.type == "settings" else None

    def describe(self) -> str:
        """``NAME (TYPE, default D; one of A, B): help`` for ``harness dbs`` and ``--help``."""
        kind = self.type + (", repeatable" if self.repeatable else "")
        parts = [kind]
        if self.default not in (None, [], {}, ()):
            parts.append(f"default {format_value(self.default)}")
        if self.choices:
            shown = ", ".join(str(c) for c in self.choices[:12]) + (", ..." if len(self.choices) > 12 else "")
            parts.append(f"one of {shown}")
        if self.minimum is not None or self.maximum is not None:
            low = "" if self.minimum is None else f"{self.minimum:g}"
            high = "" if self.maximum is None else f"{self.maximum:g}"
            parts.append(f"from {low or '-inf'} to {high or 'inf'}")
        return f"{self.name} ({'; '.join(parts)}): {self.help}"

    # -- values ------------------------------------------------------------------------------------

    def parse_text(self, text: str) -> Any:
        """One command-line value (the text after ``NAME=``), typed; not yet range-checked."""
        if self.type == "settings":
            key, sep, raw = text.partition("=")
            if not sep or not key.strip():
                raise PluginError(f"option {self.name}: {text!r} is not KEY=VALUE")
            try:
                return {key.strip(): json.loads(raw)}
            except json.JSONDecodeError:
                return {key.strip(): raw}
        if self.type == "bool":
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise PluginError(f"option {self.name}: {text!r} is not true or false")
        if self.type in ("int", "float"):
            try:
                return int(text) if self.type == "int" else float(text)
            except ValueError:
                what = "a whole number" if self.type == "int" else "a number"
                raise PluginError(f"option {self.name}: {text!r} is not {what}") from None
        return text

    def check(self, value: Any) -> Any:
        """A value from JSON, TOML or :meth:`parse_text`, checked against the type, choices and bounds;
        returns it normalised (a list for a repeatable option, a dict for settings)."""
        if self.type == "settings":
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise PluginError(f"option {self.name}: must be a table of NAME=VALUE settings, not {value!r}")
            return dict(sorted(value.items()))
        if self.repeatable:
            items = list(value) if isinstance(value, list | tuple) else [value]
            return [self._check_one(item) for item in items]
        return self._check_one(value)

    def _check_one(self, value: Any) -> Any:
        if value is None and self.default is None:
            return None
        kind = {"str": str, "int": int, "float": (int, float), "bool": bool}[self.type]
        if isinstance(value, bool) and self.type != "bool" or not isinstance(value, kind):
            raise PluginError(f"option {self.name}: {value!r} is not a {self.type}")
        if self.type == "float":
            value = float(value)
            if not math.isfinite(value):
                raise PluginError(f"option {self.name}: {value!r} is not a finite number")
        if self.choices and value not in self.choices:
            raise PluginError(
                f"option {self.name}: unknown value {value!r}; valid: {', '.join(str(c) for c in self.choices)}"
            )
        if self.minimum is not None and value < self.minimum:
            raise PluginError(f"option {self.name}: {value!r} is below the minimum {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise PluginError(f"option {self.name}: {value!r} is above the maximum {self.maximum:g}")
        return value


def format_value(value: Any) -> str:
    """An option value as a person (and the command line) writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ",".join(format_value(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class DBContext:
    """What an adapter may need to know about the test when it is built.

    ``faketime`` is set when the test's nemesis moves wall clocks: an adapter with ``ClockSkew`` starts
    its processes with ``faketime.environment()``.
    """

    seed: int
    nodes: tuple[str, ...]
    workload: str
    platform: str = "docker"
    faketime: FakeTime | None = None


@dataclass(frozen=True)
class DBPlugin:
    """A DB adapter as the harness finds it by name: its options and how to build it.

    ``create(options, context)`` returns the adapter; ``options`` holds every declared option, defaults
    filled in, already checked. ``validate(options)`` (optional) checks what one option cannot check on
    its own (a bug that exists only in some mode) and raises ``ValueError`` with one sentence.
    ``name_parts(options)`` (optional) gives the words the test's name is made of; by default the values
    of the ``in_name`` options that differ from their defaults. ``default_nemesis`` (optional) is what
    ``harness run`` injects when ``--nemesis`` is not given, for a system that cannot take every package of
    the harness's own default (a Go binary's clock, which libfaketime cannot move); None: the harness's.
    """

    name: str
    summary: str
    create: Callable[[Mapping[str, Any], DBContext], DB]
    options: tuple[Option, ...] = ()
    validate: Callable[[Mapping[str, Any]], None] | None = None
    name_parts: Callable[[Mapping[str, Any]], Sequence[str]] | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the adapter's package publishes for tools that know it (e.g. a simulator)."""
    default_nemesis: Sequence[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))
        if self.default_nemesis is not None:
            object.__setattr__(self, "default_nemesis", tuple(self.default_nemesis))
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"DB plugin {self.name}: an option is declared twice")

    def option(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        raise PluginError(self._unknown(name))

    def _unknown(self, name: str) -> str:
        known = ", ".join(o.name for o in self.options) or "none"
        return f"the {self.name} DB has no option {name!r}; its options: {known} (harness dbs lists them)"

    def parse_args(self, pairs: Iterable[str]) -> dict[str, Any]:
        """``--db-opt NAME=VALUE`` texts as raw option values (lists and settings merged in order)."""
        raw: dict[str, Any] = {}
        for pair in pairs:
            name, sep, text = pair.partition("=")
            if not sep or not name.strip():
                raise PluginError(f"--db-opt {pair!r} is not NAME=VALUE")
            self.add_text(raw, name.strip(), text)
        return raw

    def add_text(self, raw: dict[str, Any], name: str, text: str) -> None:
        """Add one command-line value of option ``name`` to ``raw`` (lists grow, settings merge)."""
        option = self.option(name)
        value = option.parse_text(text)
        if option.type == "settings":
            raw[name] = {**raw.get(name, {}), **value}
        elif option.repeatable:
            raw[name] = [*raw.get(name, []), value]
        else:
            raw[name] = value

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every declared option's value: ``given`` checked, defaults for the rest; then ``validate``.

        Raises :class:`PluginError` naming the option and what is allowed.
        """
        unknown = [name for name in given if not any(o.name == name for o in self.options)]
        if unknown:
            raise PluginError(self._unknown(unknown[0]))
        values = {o.name: o.check(given[o.name] if o.name in given else o.empty) for o in self.options}
        if self.validate is not None:
            try:
                self.validate(values)
            except PluginError:
                raise
            except ValueError as exc:
                raise PluginError(f"the {self.name} DB: {exc}") from None
        return values

    def changed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The options whose value differs from the default (what a command line must repeat)."""
        return {o.name: values[o.name] for o in self.options
                if o.name in values and values[o.name] != o.check(o.empty)}

    def test_name_parts(self, values: Mapping[str, Any]) -> list[str]:
        if self.name_parts is not None:
            return [str(p) for p in self.name_parts(values)]
        changed = self.changed(values)
        return [format_value(changed[o.name]).replace(",", "+") for o in self.options
                if o.in_name and o.name in changed]

    def command_args(self, values: Mapping[str, Any]) -> list[str]:
        """The command-line arguments that give ``values`` again: shortcut flags where declared, else
        ``--db-opt``; only options that differ from their defaults."""
        argv: list[str] = []
        for name, value in self.changed(values).items():
            option = self.option(name)
            if option.type == "settings":
                texts = [f"{k}={json.dumps(v)}" for k, v in value.items()]
            elif option.repeatable:
                texts = [format_value(v) for v in value]
            else:
                texts = [format_value(value)]
            for text in texts:
                argv += [option.flag, text] if option.flag else ["--db-opt", f"{name}={text}"]
        return argv

    def build(self, values: Mapping[str, Any], context: DBContext) -> DB:
        """The adapter for ``values`` (from :meth:`resolve`); checks that it is one."""
        from harness.db import DB

        db = self.create(values, context)
        if not isinstance(db, DB):
            raise PluginError(
                f"the {self.name} DB plugin's create() returned {type(db).__name__}, which is not a DB adapter "
                "(it needs name, setup() and teardown(); docs/db-adapter.md)"
            )
        return db


# -- finding plugins ----------------------------------------------------------------------------------------


_installed: tuple[tuple[tuple[str, int | None], ...], dict[str, Any]] | None = None
"""The last scan of the entry points, with the search path's state it was made in (:func:`installed`)."""


def _search_path_state() -> tuple[tuple[str, int | None], ...]:
    """Each ``sys.path`` entry with its modification time: installing or removing a distribution adds or
    removes its ``.dist-info`` directory in one of them, which changes that time (as the import system's
    own cache of a directory's modules knows a change: ``importlib.machinery.FileFinder``)."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


def installed() -> dict[str, Any]:
    """Name -> entry point of every DB plugin registered by an installed distribution.

    The scan reads every installed distribution's metadata (3 ms with this project's 64), and a suite
    composes each of its cases (the 520 of ``suites/bugs-all-modes.toml`` took 3.6-3.9 CPU s, 0.3-0.6 with
    the scan and ``harness.db``'s capability checks kept): it is made again only when ``sys.path`` or the
    modification time of one of its entries changed."""
    global _installed
    state = _search_path_state()
    if _installed is None or _installed[0] != state:
        found: dict[str, Any] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            found.setdefault(ep.name, ep)
        _installed = (state, dict(sorted(found.items())))
    return dict(_installed[1])


def load_plugin(name: str) -> DBPlugin:
    """The plugin called ``name`` (an installed entry point) or at ``package.module:attribute``.

    Raises :class:`PluginError` with one sentence: an unknown name (listing the installed ones), a
    module that does not import, an attribute that is missing or is not a plugin or a DB factory.
    """
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's module, reported in one line
            raise PluginError(f"--db {name}: module {module_name!r} does not import: {type(exc).__name__}: {exc}") from None
        try:
            target = getattr(module, attribute)
        except AttributeError:
            raise PluginError(f"--db {name}: module {module_name!r} has no attribute {attribute!r}") from None
        return as_plugin(target, name)
    eps = installed()
    if name not in eps:
        known = ", ".join(eps) or "none installed"
        raise PluginError(f"unknown db {name!r}; installed: {known} (or give package.module:factory)")
    try:
        target = eps[name].load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin package, reported in one line
        raise PluginError(f"the DB plugin {name!r} ({eps[name].value}) does not load: {type(exc).__name__}: {exc}") from None
    return as_plugin(target, name)


def as_plugin(target: Any, reference: str) -> DBPlugin:
    """``target`` as a plugin: itself if it is one; a zero-argument factory of a DB adapter becomes a
    plugin without options (its name from the adapter's ``name``, looked up when it is built)."""
    if isinstance(target, DBPlugin):
        return target
    if callable(target):
        def create(options: Mapping[str, Any], context: DBContext) -> DB:
            try:
                return target()
            except TypeError as exc:
                raise PluginError(f"--db {reference}: calling it with no arguments failed: {exc}") from None

        name = getattr(target, "name", None)
        return DBPlugin(name=name if isinstance(name, str) else reference, summary=f"{reference} (no options)",
                        create=create)
    raise PluginError(
        f"--db {reference} is a {type(target).__name__}, not a DBPlugin or a factory of a DB adapter"
    )


def plugin_for(db: DB) -> DBPlugin:
    """A plugin around an adapter the caller built itself (``harness.run(spec, db=MyDB())``)."""
    return DBPlugin(name=db.name, summary=f"{type(db).__name__} given by the caller", create=lambda o, c: db)
