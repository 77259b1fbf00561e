"""``harness new-db NAME [DIR]``: write the skeleton of a DB adapter package, as ``lein new jepsen`` starts a
Jepsen test.

The skeleton is a package of the user's own, outside this project, that works as written: it registers
its plugin under the entry-point group ``chaos_harness.dbs`` (``harness run --db NAME`` finds it once it is
installed), and its adapter deploys a stand-in system (a one-primary register server, standard library
only) so that its generated tests pass before the user has written a line. Every place the user replaces
is marked ``REPLACE``. What is written (``PACKAGE`` is NAME with ``-`` as ``_``, plus ``_chaos``)::

    DIR/NAME/pyproject.toml                 the distribution NAME-chaos, its entry point, pytest markers
    DIR/NAME/README.md                      the next steps
    DIR/NAME/.gitignore                     runs (store/) and build output
    DIR/NAME/PACKAGE/__init__.py            the plugin: the adapter's options
    DIR/NAME/PACKAGE/db.py                  the adapter, every capability written out and documented
    DIR/NAME/PACKAGE/client.py              the workload client
    DIR/NAME/PACKAGE/server.py              the stand-in system (REPLACE: it goes when yours comes)
    DIR/NAME/tests/test_PACKAGE.py          the adapter's pieces against local processes (no Docker)
    DIR/NAME/tests/test_PACKAGE_docker.py   ``harness run --db NAME`` on containers: valid; a bug caught

The templates are package data (``harness/scaffold_template/``); ``@@{name}``-style placeholders
(:class:`_Template`) are filled in, so the templates contain no character Python or a shell would read
as a placeholder. The package is written to a hidden temporary directory beside the target and renamed
into place, so a failure leaves nothing half-written.

Bad input is a :class:`ScaffoldError`, one sentence, exit 254: a NAME that is not a valid DB name or that
an installed plugin already has, a target that exists and is not an empty directory, a DIR that is not a
directory or cannot be written.
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import shutil
import string
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.db.plugin import installed
from harness.subcommand import UsageError

NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
"""A DB name: lower-case letters and digits, words joined by single ``-`` or ``_`` (``my-db``, ``redis7``).
It names the entry point, the test names in the store and the directory written."""
MAX_NAME = 40
TEMPLATE_DIR = "scaffold_template"

# Template file (under harness/scaffold_template/) -> path written under DIR/NAME/, with placeholders.
FILES: dict[str, str] = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "gitignore.tmpl": ".gitignore",
    "package/__init__.py.tmpl": "@@{package}/__init__.py",
    "package/db.py.tmpl": "@@{package}/db.py",
    "package/client.py.tmpl": "@@{package}/client.py",
    "package/server.py.tmpl": "@@{package}/server.py",
    "tests/test_adapter.py.tmpl": "tests/test_@@{package}.py",
    "tests/test_docker.py.tmpl": "tests/test_@@{package}_docker.py",
}


class ScaffoldError(UsageError):
    """``harness new-db`` cannot write the skeleton: one sentence naming what is wrong (exit 254)."""


class _Template(string.Template):
    """``@@{name}`` placeholders: ``@@`` occurs in neither Python nor shell code, ``$`` and ``{}`` do."""

    delimiter = "@@"


@dataclass(frozen=True)
class Names:
    """The names a skeleton is written with, all derived from the DB's name."""

    name: str
    """The DB's name: ``harness run --db NAME``, the entry point's name."""
    package: str
    """The Python package: ``my_db_chaos``."""
    distribution: str
    """The distribution pip installs: ``my-db-chaos``."""
    cls: str
    """The adapter's class name: ``MyDbDB``."""

    def mapping(self) -> dict[str, str]:
        return {"name": self.name, "package": self.package, "dist": self.distribution, "Class": self.cls}


def names_for(name: str) -> Names:
    """The names of a skeleton for the DB ``name``; :class:`ScaffoldError` if ``name`` cannot be one."""
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME:
        raise ScaffoldError(
            f"{name!r} is not a DB name: use lower-case letters and digits, words joined by '-' or '_', "
            f"starting with a letter, at most {MAX_NAME} characters (e.g. my-db)"
        )
    words = re.split(r"[-_]", name)
    package = "_".join(words) + "_chaos"
    if not package.isidentifier() or keyword.iskeyword(package):  # cannot happen with the pattern; kept honest
        raise ScaffoldError(f"{name!r} gives no valid Python package name ({package!r})")
    return Names(name=name, package=package, distribution="-".join(words) + "-chaos",
                 cls="".join(w.capitalize() for w in words) + "DB")


def render(names: Names) -> dict[str, str]:
    """Every file of the skeleton: relative path -> text."""
    root = resources.files("harness") / TEMPLATE_DIR
    values = names.mapping()
    files: dict[str, str] = {}
    for template, target in FILES.items():
        text = (root / template).read_text(encoding="utf-8")
        files[_Template(target).substitute(values)] = _Template(text).substitute(values)
    return files


def _check_target(names: Names, parent: Path) -> Path:
    """The directory to write, ``parent/NAME``; refused if it exists and is not an empty directory."""
    taken = installed().get(names.name)
    if taken is not None:
        raise ScaffoldError(
            f"a DB called {names.name!r} is already installed ({taken.value}); choose another NAME"
        )
    if parent.exists() and not parent.is_dir():
        raise ScaffoldError(f"{parent} is not a directory; give a directory to write {names.name}/ into")
    target = parent / names.name
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ScaffoldError(f"{target} exists and is not a directory; choose another DIR or NAME")
    if target.is_dir() and any(target.iterdir()):
        raise ScaffoldError(f"{target} exists and is not empty; choose another DIR or NAME, or remove it")
    return target


def write_skeleton(name: str, directory: str | os.PathLike[str] = ".") -> tuple[Path, list[str]]:
    """Write the skeleton package of DB ``name`` to ``directory/name``; return that path and the files
    written (relative paths). Raises :class:`ScaffoldError` on bad input; writes nothing then."""
    names = names_for(name)
    parent = Path(directory)
    target = _check_target(names, parent)
    files = render(names)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{names.name}-", dir=parent))
    except OSError as exc:
        raise ScaffoldError(f"cannot write into {parent}: {exc.strerror or exc}") from None
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.chmod(0o755)  # mkdtemp makes it 0700
        if target.is_dir():
            target.rmdir()  # empty, checked above
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ScaffoldError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target, sorted(files)


# -- the command ------------------------------------------------------------------------------------------


def add_new_db_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``harness new-db`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    parser = subparsers.add_parser(
        "new-db",
        help="write a skeleton DB adapter package for your own system (then: pip install -e DIR/NAME)",
        description="Write DIR/NAME/: a package with a DB adapter plugin for harness run --db NAME, every "
        "capability stubbed and documented, a workload client, a stand-in system it deploys so that it "
        "works at once, and tests that run it. Replace the places marked REPLACE with your system. "
        "Exit 0 written, 254 bad input (nothing written).",
    )
    parser.add_argument("name", metavar="NAME", help="the DB's name, e.g. my-db (lower case, digits, '-', '_')")
    parser.add_argument("directory", metavar="DIR", nargs="?", default=".",
                        help="where to write NAME/ (default: the current directory)")
    parser.set_defaults(handler=cmd_new_db)
    return parser


def cmd_new_db(args: argparse.Namespace, console: Console, err: Console) -> int:
    target, files = write_skeleton(args.name, args.directory)
    names = names_for(args.name)
    console.print(f"wrote {target}: the {names.name} DB adapter package {names.package} ({len(files)} files)",
                  markup=False, highlight=False)
    for relative in files:
        console.print(f"  {relative}", markup=False, highlight=False)
    console.print(
        "next, in the environment where chaos-harness is installed:\n"
        f"  pip install -e {target}\n"
        f"  harness dbs {names.name}\n"
        f"  python -m pytest {target}/tests            # the adapter's pieces, then a run on containers\n"
        f"  harness run --db {names.name} --nodes 3 --nemesis partition,kill,pause,clock --time-limit 30 "
        "--analysis direct\n"
        f"then replace the stand-in with your system: the places marked REPLACE ({target}/README.md)",
        markup=False, highlight=False,
    )
    return 0
