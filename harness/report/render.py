"""The run report: a stored run -> ``report.html``, one self-contained page (CSS, figures and the little
JavaScript inline; links to the run's own files are relative), rendered with Jinja2.

What the page shows, in this order: the verdict and the checkers that failed; the seed and the exact
commands that run the test again and replay this run; each failed checker's counterexample drawn for
people (:mod:`harness.report.counterexamples`); one timeline of faults, node roles and terms,
operations, latency and throughput (:mod:`harness.report.timeline`); the clock offsets the nemesis
applied; the faults it could not apply here; the other checkers; links to the history, journals and
logs.

Autoescaping is on for every template: keys, values and errors come from the system under test and are
shown as text, never as markup. The figures are escaped where they are built (:mod:`harness.report.svg`);
links built from names (node directories, files, checkers) are path-encoded by :mod:`harness.report.links`.
Every page also carries :data:`PAGE_POLICY` as its content security policy: should anything slip past
the escaping, the browser would still run no script but the index's own and fetch nothing.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from harness.opportunities import entry_text
from harness.report.clocks import OffsetChange, align, clock_offsets
from harness.report.counterexamples import CheckerView, anomaly_time, checker_view
from harness.report.data import RunData, load_run, no_cyclic_gc
from harness.report.faults import Unapplied, fault_colours, fault_view
from harness.report.links import file_href, fragment
from harness.report.svg import NS, short
from harness.report.timeline import MAX_BARS, Timeline, build_timeline
from harness.store import NODES, write_text

TEMPLATES = Path(__file__).resolve().parent / "templates"
REPORT = "report.html"
VERDICT_WORDS = {True: "valid", False: "invalid", "unknown": "unknown", None: "not analysed"}
VERDICT_CLASSES = {True: "valid", False: "invalid", "unknown": "unknown", None: "none"}

# The index's filter script (templates/index.js), the only script any page runs. The policy allows it by
# its hash, so neither a <script> that slipped into a page nor a javascript: link could run, and forbids
# every fetch: the pages are self-contained. Inline styles (the stylesheet, SVG attributes) are allowed.
INDEX_SCRIPT = (TEMPLATES / "index.js").read_text(encoding="utf-8")
PAGE_POLICY = "; ".join((
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    "img-src data:",
    "script-src 'sha256-" + base64.b64encode(hashlib.sha256(INDEX_SCRIPT.encode("utf-8")).digest()).decode() + "'",
    "base-uri 'none'",
    "form-action 'none'",
))


@functools.cache
def environment() -> Environment:
    """The Jinja2 environment of the report templates: autoescape on, undefined names are errors.

    One per process, shared by every page it renders (reports, the index, suite pages), so each
    template is compiled once per process rather than once per page. Rendering from several threads
    at once is fine; nothing may change the environment after it is made."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["page_policy"] = PAGE_POLICY
    env.globals["index_script"] = Markup(INDEX_SCRIPT)
    env.globals["fault_colours"] = fault_colours
    env.globals["verdict_word"] = verdict_word
    env.globals["verdict_class"] = verdict_class
    env.filters["fragment"] = fragment
    env.filters["verdict_word"] = verdict_word
    env.filters["verdict_class"] = verdict_class
    env.filters["seconds"] = lambda ns: "—" if ns is None else f"{ns / NS:.3f} s"
    env.filters["thousands"] = lambda n: "—" if n is None else f"{n:,}" if isinstance(n, int) else str(n)
    env.filters["opportunities"] = entry_text
    return env


def verdict_word(valid: Any) -> str:
    return VERDICT_WORDS.get(valid if valid in (True, False, None) else str(valid), str(valid))


def verdict_class(valid: Any) -> str:
    return VERDICT_CLASSES.get(valid if valid in (True, False, None) else str(valid), "unknown")


@dataclass
class Command:
    label: str
    text: str
    note: str | None = None


@dataclass(frozen=True)
class OffsetRow:
    """Clock offsets one nemesis operation set: the same offset on ``nodes``."""

    time: int
    nodes: str
    offset: str
    probes: str
    how: str
    line: int


def offset_rows(changes: Sequence[OffsetChange]) -> list[OffsetRow]:
    """One row per clock operation and offset (a reset of five nodes is one row, not five)."""
    groups: dict[tuple[Any, ...], list[OffsetChange]] = {}
    for change in changes:
        groups.setdefault((change.line, change.offset, change.strobe_to, change.until, change.kind), []).append(change)
    rows = []
    for (line, offset, strobe_to, until, kind), group in groups.items():
        how = kind
        if strobe_to is not None:
            how += f", flipping to {strobe_to:+.3f} s until {until / NS:.3f} s" if until is not None else ""
        probes = ", ".join(f"{c.node} {c.probe:+.3f} s" for c in group if c.probe is not None) or "—"
        rows.append(OffsetRow(group[0].time, ", ".join(c.node for c in group), f"{offset:+.3f} s", probes, how, line))
    return sorted(rows, key=lambda row: (row.time, row.line))


@dataclass
class Report:
    """The view model of ``report.html``."""

    title: str
    test: str
    run: str
    valid: Any
    headline: str
    failed: list[CheckerView]
    undecided: list[CheckerView]
    passed: list[CheckerView]
    seed: Any
    commands: list[Command]
    parameters: list[tuple[str, str]]
    figures: list[tuple[str, str]]
    timeline: Timeline
    offsets: list[OffsetRow]
    unapplied: list[Unapplied]
    fault_counts: list[tuple[str, int, int]]
    files: list[tuple[str, str | None, str]]
    problems: list[str]
    run_error: str | None
    alignment: str
    under_exercised: str | None
    generated: str
    analysed_by: str | None
    focus: str | None
    index_href: str | None = None
    where: str = ""  # the run directory relative to its store: <test>/<run>


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return ""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def _files(run: RunData) -> list[tuple[str, str | None, str]]:
    """(label, link or None, what it is) of each file of the run; a node's file that a browser would run
    as a page is not linked (:func:`harness.report.links.file_href`)."""
    described = {
        "history.jsonl": "every operation and fault, in order",
        "test.json": "the test's spec, seed and versions",
        "schedule.jsonl": "the fault schedule the seed produced",
        "results.json": "the checkers' verdicts and counterexamples",
        "harness.log": "the controller's log",
    }
    out = [(name, name, f"{described.get(name, '')} · {_size(run.path / name)}") for name in run.files]
    for node, names in run.node_files.items():
        for name in names:
            what = "journal: roles, votes, appends, commits, applies" if name == "journal.jsonl" else "log"
            size = _size(run.path / NODES / node / name)
            out.append((f"{node}: {name}", file_href(NODES, node, name), f"{what} · {size}"))
    return out


def _spec(test: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = test.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _parameters(run: RunData) -> list[tuple[str, str]]:
    test, spec = run.test, _spec(run.test)

    def listed(value: Any) -> str:
        if isinstance(value, list | tuple):
            return ", ".join(str(v) for v in value) or "none"
        return "—" if value is None else str(value)

    timings = test.get("timings") if isinstance(test.get("timings"), Mapping) else {}
    versions = test.get("versions") if isinstance(test.get("versions"), Mapping) else {}
    platform = test.get("platform")
    platform_kind = platform.get("kind") if isinstance(platform, Mapping) else platform or spec.get("platform")
    rows = [
        ("db", listed(test.get("db") or spec.get("db"))),
        ("mode", listed(test.get("mode") or spec.get("mode"))),
        ("bugs", listed(test.get("bugs", spec.get("bugs")))),
        ("nodes", listed(run.nodes)),
        ("workload", listed(test.get("workload") or spec.get("workload"))),
        ("model", listed(test.get("model"))),
        ("nemesis", listed(test.get("nemesis", spec.get("nemesis")))),
        ("platform", listed(platform_kind)),
        ("time limit", f"{timings.get('time_limit', spec.get('time_limit', '—'))} s"),
        ("concurrency", listed(spec.get("concurrency"))),
        ("started", listed(timings.get("started"))),
        ("git commit", listed(test.get("git_commit"))),
        ("harness", listed(versions.get("chaos-harness"))),
        ("python", listed(versions.get("python"))),
    ]
    return [(name, value) for name, value in rows if value not in ("—", "— s")]


def _commands(run: RunData) -> list[Command]:
    test, spec = run.test, _spec(run.test)
    commands: list[Command] = []
    platform = test.get("platform")
    kind = platform.get("kind") if isinstance(platform, Mapping) else platform or spec.get("platform")
    replay = test.get("replay_command") or test.get("replay")
    if isinstance(replay, str) and replay:
        commands.append(Command("Replay this run", replay,
                                "On the sim platform the seed fixes everything: the replay yields the same history, "
                                "byte for byte." if kind == "sim" else None))
    if isinstance(test.get("command"), str) and test["command"] != replay:
        note = None
        if kind in ("docker", "ssh"):
            note = ("The seed fixes the schedule of operations and faults; thread interleavings may still differ, "
                    "so a replay reproduces a failure at some rate.")
        commands.append(Command("Run the test again with the same seed", test["command"], note))
    store = spec.get("store")
    if isinstance(store, str):
        where = str(Path(store) / run.path.parent.name / run.path.name)
    else:
        where = str(run.path)
    if not replay:
        commands.append(Command(
            "Replay this run's fault schedule (and count how often it fails again)",
            f"harness reproduce {shlex.quote(where)} --times 5",
        ))
    commands.append(Command("Re-analyse this run and rebuild this page",
                            f"harness analyze {shlex.quote(where)}"))
    return commands


def _under_exercised(results: Mapping[str, Any]) -> str | None:
    """``harness.coverage``'s sentence for a run that applied little of its fault schedule."""
    coverage = results.get("coverage")
    text = coverage.get("under_exercised") if isinstance(coverage, Mapping) else None
    return text if isinstance(text, str) else None


def _headline(run: RunData, failed: Sequence[CheckerView]) -> str:
    results = run.results
    if results is None:
        return "This run has not been analysed yet (no results.json): run harness analyze on it."
    if failed:
        names = ", ".join(view.name for view in failed)
        return f"{len(failed)} of {len(results.get('checkers') or {})} checkers found an anomaly: {names}."
    if results.get("valid") is True:
        return f"Every checker passed ({len(results.get('checkers') or {})})."
    return "No anomaly was found, but the verdict is unknown: see why below."


def build_report(run: RunData, *, max_bars: int = MAX_BARS, index_href: str | None = None) -> Report:
    """The view model of ``report.html`` for a run read by :func:`harness.report.data.load_run`."""
    nodes = run.nodes
    offsets = clock_offsets(run.nemesis, nodes)
    alignment = align(run.test, run.journals, run.status, offsets)
    faults = fault_view(run.nemesis, nodes, run.end_ns)
    checkers = (run.results or {}).get("checkers") or {}
    ops_by_id = {op.id: op for op in run.ops}
    views = [
        checker_view(str(name), verdict, alignment, faults, run.end_ns, ops_by_id)
        for name, verdict in checkers.items()
        if isinstance(verdict, Mapping)
    ]
    failed = [v for v in views if v.valid is False]
    undecided = [v for v in views if v.valid not in (True, False)]
    passed = [v for v in views if v.valid is True]
    focus = None
    for view in failed:
        found = anomaly_time(checkers[view.name].get("counterexample"), alignment)
        if found is not None and (focus is None or found[0] < focus[0]):
            focus = (found[0], f"{found[1]} ({view.name})")
    timeline = build_timeline(run, faults, alignment, offsets, focus, max_bars=max_bars)
    kinds = Counter(op.type for op in run.ops)
    ok = kinds["ok"]
    figures = [
        ("operations", f"{len(run.ops):,}"),
        ("ok / fail / info", f"{ok:,} / {kinds['fail']:,} / {kinds['info'] + kinds['pending']:,}"),
        ("history", f"{run.end_ns / NS:.1f} s"),
        ("ok ops/s", f"{ok / (run.end_ns / NS):.1f}" if run.end_ns else "—"),
        ("faults", f"{sum(c['applied'] for c in faults.counts.values())} applied, {len(faults.unapplied)} not"),
    ]
    results = run.results or {}
    run_error = results.get("error") if isinstance(results.get("error"), str) else None
    analysed = results.get("analysed_by") or analysed_by(results.get("analysis"))
    test_name = str(run.test.get("test") or results.get("test") or run.path.parent.name)
    return Report(
        title=f"{verdict_word(run.valid)} · {test_name} · {run.path.name}",
        test=test_name,
        run=run.path.name,
        valid=run.valid,
        headline=_headline(run, failed),
        failed=failed,
        undecided=undecided,
        passed=passed,
        seed=run.test.get("seed", results.get("seed")),
        commands=_commands(run),
        parameters=_parameters(run),
        figures=figures,
        timeline=timeline,
        offsets=offset_rows(offsets),
        unapplied=faults.unapplied,
        fault_counts=[(f, c["invoked"], c["applied"]) for f, c in faults.counts.items()],
        files=_files(run),
        problems=run.problems + [f"teardown: {short(e, 300)}" for e in results.get("teardown_errors") or []],
        run_error=run_error,
        alignment=alignment.method,
        under_exercised=_under_exercised(results),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        analysed_by=str(analysed) if analysed else None,
        focus=focus[1] if focus else None,
        index_href=index_href,
        where=f"{run.path.parent.name}/{run.path.name}",
    )


def render_report(report: Report, env: Environment | None = None) -> str:
    """``report.html``'s text."""
    return (env or environment()).get_template("report.html.j2").render(r=report)


def _index_href(run_dir: Path) -> str | None:
    """The relative link from a run directory to its store's ``index.html`` (``../../index.html``)."""
    store = run_dir.parent.parent
    return "../../index.html" if (store / "index.html").exists() or (store / "latest").exists() else None


def analysed_by(analysis: Any) -> str | None:
    """Who judged a run, from its ``results.json``'s ``analysis`` record: this process's pipeline, or Spark
    (its master named)."""
    if not isinstance(analysis, Mapping):
        return None
    if analysis.get("engine"):
        return f"the analysis pipeline, {analysis['engine']}"
    master = analysis.get("spark_master")
    return f"the analysis pipeline on Spark ({master})" if master else "the analysis pipeline"


def write_report(run_dir: str | os.PathLike[str], *, max_bars: int = MAX_BARS) -> Path:
    """Read the stored run at ``run_dir`` and (re)write its ``report.html``; return the file's path.

    Raises ``FileNotFoundError`` when ``run_dir`` is not a stored run (no ``test.json``).
    """
    run_dir = Path(run_dir)
    with no_cyclic_gc():
        run = load_run(run_dir)
        report = build_report(run, max_bars=max_bars, index_href=_index_href(run_dir.resolve()))
        text = render_report(report)
    return write_text(run_dir / REPORT, text)


__all__ = ["PAGE_POLICY", "REPORT", "Report", "build_report", "environment", "render_report", "write_report"]
