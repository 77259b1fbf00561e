"""Links in the generated pages, built from data: always relative, always path-encoded.

Every ``href`` that the index, the suite pages and the run reports build from stored data (test and run
directory names, suite names, node names, file names, checker names, paths recorded in ``suite.json`` and
``results.json``) goes through this module. A name is one path segment, percent-encoded with
``urllib.parse.quote`` and nothing left unescaped, so ``:``, ``/``, ``?``, ``#``, ``%``, spaces and quotes
can never change what the link means: a directory named ``javascript:alert(1)`` becomes the relative
link ``javascript%3Aalert%281%29``, which a browser can only resolve to a file beside the page.

The guarantees, which ``tests/harness/test_report_links.py`` checks: the result never has a scheme or a
host, never starts with ``/``, and holds no ``.`` or ``..`` segment taken from data (a name that is empty,
``.`` or ``..`` is refused with ``UnsafeLink``; a recorded path holding one gets no link at all), so a
link from data stays inside the directory tree it was meant for. Segments the code writes itself
(``..`` up to the store from a suite page) are passed as literals by the caller, never through here.

A file the system under test wrote is linked only if a browser would show it rather than run it
(:func:`file_href`): opened from disk, an ``.html`` or ``.svg`` log would be a page with scripts.
``harness serve`` shows every such file as text, but a report must be safe opened from disk too.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import quote

REFUSED_SEGMENTS = ("", ".", "..")
# Suffixes of files a browser opens as a document that can run script.
ACTIVE_SUFFIXES = frozenset((".htm", ".html", ".mht", ".mhtml", ".pdf", ".shtml", ".svg", ".svgz", ".xht",
                             ".xhtml", ".xml", ".xsl", ".xslt"))


class UnsafeLink(ValueError):
    """A name that cannot be one segment of a relative link (empty, ``.`` or ``..``)."""


def segment(name: str) -> str:
    """``name`` as one percent-encoded path segment (every reserved character escaped, ``/`` included)."""
    if name in REFUSED_SEGMENTS:
        raise UnsafeLink(f"{name!r} cannot be a link's path segment")
    return quote(name, safe="")


def href(*names: str) -> str:
    """The relative link ``name/name/...``, each name one encoded segment (``href("a b", "x")`` is
    ``a%20b/x``). Raises ``UnsafeLink`` for an empty, ``.`` or ``..`` name, or when no name is given."""
    if not names:
        raise UnsafeLink("a link needs at least one path segment")
    return "/".join(segment(name) for name in names)


def file_href(*names: str) -> str | None:
    """:func:`href` for a file someone else wrote, or None if its name says a browser would run it."""
    if names and PurePosixPath(names[-1]).suffix.lower() in ACTIVE_SUFFIXES:
        return None
    return href(*names)


def recorded_href(path: object) -> str | None:
    """The link for a relative path recorded in data (``nodes/n1/journal.jsonl`` from ``results.json``,
    ``<test>/<run>`` from ``suite.json``), or None when it is not a plain relative path below the page:
    not a string, absolute, or holding an empty, ``.`` or ``..`` segment."""
    if not isinstance(path, str):
        return None
    try:
        return href(*path.split("/"))
    except UnsafeLink:
        return None


def fragment(name: str) -> str:
    """``name`` percent-encoded for use after ``#``; browsers decode it again to find the element whose
    ``id`` is ``name``."""
    return quote(name, safe="")
