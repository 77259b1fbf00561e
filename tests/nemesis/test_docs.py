"""docs/nemesis.md's list of what a new fault touches is the true one, proved by adding a fault.

The list sits between ``<!-- fault-files -->`` markers, one role a line (``package``, ``action``,
``protocol``, ``test``). ``tests/harness/capability_extension.py`` is a throwaway fault package written the
way that list says (``truncate-tail``: a new capability, a fault that carries the bytes it cuts); this test
registers it through the registries the docs name and nothing else, composes it, runs it in the simulator
and reads its report. If a fault needed one more table somewhere, the run here would fail; if the list
named a role the throwaway does not fill, or the throwaway's code spread over more files than roles, the
comparison would.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import harness.db as harness_db
from harness.compose import compose
from harness.db import MissingCapability, check_capabilities, nemesis_needs
from harness.report.faults import family_of, fault_view
from harness.report.render import environment
from harness.run import run
from harness.spec import ConfigError, TestSpec
from nemesis import faults as vocabulary
from nemesis import generator
from tests.harness import capability_extension as throwaway

ROOT = Path(__file__).resolve().parents[2]


def _documented() -> dict[str, str]:
    text = (ROOT / "docs" / "nemesis.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- fault-files -->(.*?)<!-- /fault-files -->", text, re.S)
    assert block, "docs/nemesis.md lost its <!-- fault-files --> list"
    return dict(re.findall(r"^\d+\. \*\*(\w+)\*\*: (.*)$", block.group(1), re.M))


ROLES: dict[str, Any] = {
    "package": throwaway.PACKAGE.fault,
    "action": throwaway.TruncateTail.action,
    "protocol": throwaway.truncating_db,
    "test": lambda: None,
}
"""Where the throwaway fills each role of the documented list (the test's own is this module)."""


@pytest.fixture
def extended(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The throwaway registered for this test only; the ids of the registries it wrote to."""
    touched: list[int] = []

    def setitem(table: Any, key: Any, value: Any) -> None:
        touched.append(id(table))
        monkeypatch.setitem(table, key, value)

    throwaway.add(setitem)
    return touched


def test_the_documented_roles_are_the_throwaways_files() -> None:
    assert set(_documented()) == set(ROLES)
    files = {role: Path(inspect.getsourcefile(obj) or "") for role, obj in ROLES.items()}
    assert len(set(files.values())) <= len(ROLES) <= 4
    documented = " ".join(_documented().values())
    for name in ("register_package", "CAPABILITY_METHODS", "Package", "Action", "Processes.act"):
        assert f"`{name}" in documented, name


def test_a_new_fault_needs_only_the_registries_the_docs_name(extended: list[int]) -> None:
    assert set(extended) == {id(harness_db.CAPABILITY_METHODS), id(generator.PACKAGES), id(vocabulary.FAULT_TYPES)}
    assert nemesis_needs()[throwaway.NEMESIS] == ("DataFile", "Process")
    assert harness_db.NEMESIS_CAPABILITIES[throwaway.NEMESIS] == (throwaway.DataFile, harness_db.Process)
    assert generator.nemesis_names()[-1] == throwaway.NEMESIS  # appended: no shipped seed moves
    assert generator.final_heal_order().index(throwaway.NEMESIS) > generator.final_heal_order().index("pause")
    fault = throwaway.TruncateTail(("n2",), 512)
    assert vocabulary.fault_from_json(vocabulary.fault_to_json(fault)) == fault
    assert vocabulary.describe(fault) == "truncate-tail 512 B on n2"
    assert family_of(throwaway.NEMESIS) == throwaway.NEMESIS


def test_composition_reads_the_packages_needs(extended: list[int]) -> None:
    from adapters.cluster.db import ClusterDB

    with pytest.raises(MissingCapability, match="'truncate-tail' nemesis needs the DB capability DataFile"):
        check_capabilities(ClusterDB(), [throwaway.NEMESIS])
    check_capabilities(throwaway.truncating_db(), [throwaway.NEMESIS])
    with pytest.raises(ConfigError, match="needs at least 3 nodes"):
        compose(TestSpec(seed=1, db="cluster", platform="sim", nodes=2, nemesis=(throwaway.NEMESIS,)),
                db=throwaway.truncating_db())


def test_the_throwaway_fault_runs_in_the_simulator_with_its_value(extended: list[int], tmp_path: Path) -> None:
    spec = TestSpec(seed=5, db="cluster", platform="sim", nodes=5, nemesis=(throwaway.NEMESIS, "partition"),
                    time_limit=12, nemesis_interval=2, store=str(tmp_path / "store"))
    result = run(spec, db=throwaway.truncating_db())
    assert result.run_dir is not None and result.error is None, result.error
    lines = [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]
    cuts = [e for e in lines if e.get("process") == "nemesis" and e.get("f") == throwaway.NEMESIS]
    invokes = [e for e in cuts if e["type"] == "invoke"]
    assert invokes and all(e["value"]["bytes"] in throwaway.CUTS for e in invokes)
    done = [e for e in cuts if e["type"] == "ok"]
    assert len(done) == len(invokes) and all("records_cut" in e["value"] for e in done)
    # Kill and start around it record what they always did.
    kills = [e for e in lines if e.get("process") == "nemesis" and e.get("f") == "kill" and e["type"] == "invoke"]
    assert kills and all(set(e["value"]) == {"targets"} for e in kills)
    # The report draws it in its own lane and colour, each band over once its cut is done.
    from harness.report.data import load_run

    data = load_run(result.run_dir)
    view = fault_view(data.nemesis, data.nodes, data.end_ns)
    bands = [span for span in view.spans if span.family == throwaway.NEMESIS]
    assert bands and all(span.healed and span.end < data.end_ns for span in bands)
    assert view.families[-1] == throwaway.NEMESIS
    css = environment().get_template("style.css.j2").render()
    assert "svg .f-truncate-tail { fill: #8d6e63; }" in css and "svg .f-partition { fill: #4c7dd9; }" in css
    report = (result.run_dir / "report.html").read_text(encoding="utf-8")
    assert 'class="f-truncate-tail band"' in report and "svg .f-truncate-tail { fill: #8d6e63; }" in report


def test_without_the_registration_the_fault_is_unknown() -> None:
    assert throwaway.NEMESIS not in generator.nemesis_names()
    with pytest.raises(ValueError, match="unknown nemesis operation 'truncate-tail'"):
        vocabulary.fault_from_json({"f": throwaway.NEMESIS, "value": {"targets": ["n1"], "bytes": 1}})
