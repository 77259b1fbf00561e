"""The report's timeline for a system with a leader per group (a shard, a partition, a queue): group role
spans from journals and status observations, a lane per group (the busiest when many), and the
elections counted per group; the node lanes and the cluster-level count stay as they were."""

from __future__ import annotations

from harness.report.clocks import NS, Alignment
from harness.report.data import ClientOp, JournalMark
from harness.report.svg import Scale, Svg
from harness.report.timeline import (
    MAX_GROUP_LANES,
    RoleSpan,
    _draw_group_lanes,
    all_group_lanes,
    busiest_groups,
    count_elections,
    count_group_elections,
    group_order,
    groups_sentence,
    journal_roles,
    status_roles,
)

ORIGIN = 1_700_000_000.0


def _mark(node: str, t: float, event: str, role: str | None = None, term: int | None = None,
          group: str | None = None, seq: int = 0) -> JournalMark:
    return JournalMark(node, seq, ORIGIN + t, event, role, term, None, seq + 1, group)


def test_journal_group_roles_become_group_spans_and_leave_the_node_lane_alone() -> None:
    marks = [
        _mark("n1", 0.0, "start"),
        _mark("n1", 1.0, "role", "leader", 1),
        _mark("n1", 2.0, "role", "leader", 1, "shard-0"),
        _mark("n1", 3.0, "role", "follower", 2, "shard-1"),
        _mark("n1", 5.0, "role", "follower", 2, "shard-0"),
        _mark("n1", 8.0, "stop"),
    ]
    spans = journal_roles({"n1": marks}, Alignment(origin=ORIGIN, method="exact", uncertainty=0.0), 10 * NS)
    node = [(s.role, s.start // NS, s.end // NS) for s in spans if s.group is None]
    assert node == [("up", 0, 1), ("leader", 1, 8), ("down", 8, 10)]  # as without the group events
    shard0 = [(s.role, s.term, s.start // NS, s.end // NS) for s in spans if s.group == "shard-0"]
    assert shard0 == [("leader", 1, 2, 5), ("follower", 2, 5, 8)]  # the stop ends the group's span
    assert [(s.role, s.end // NS) for s in spans if s.group == "shard-1"] == [("follower", 8)]


def _status(node: str, t: float, groups: list[dict]) -> ClientOp:
    call = int(t * NS)
    return ClientOp(id=0, process=100, f="status", key=None, value=None,
                    output={"node": node, "role": "follower", "term": None, "leader": None, "groups": groups},
                    type="ok", call=call, ret=call + 1_000_000, node=node, lsn=None, error=None,
                    invoke_line=1, complete_line=2)


def test_status_groups_become_group_spans() -> None:
    ops = [_status("n1", 0.0, [{"group": "q1", "role": "leader", "term": 3, "leader": "n1"}, "junk"]),
           _status("n1", 1.0, [{"group": "q1", "role": "follower", "term": 4, "leader": "n2"}])]
    spans = status_roles(ops, 3 * NS)
    groups = [(s.group, s.role, s.term, s.leader) for s in spans if s.group is not None]
    assert groups == [("q1", "leader", 3, "n1"), ("q1", "follower", 4, "n2")]
    assert [s.role for s in spans if s.group is None] == ["follower", "follower"]


def _span(node: str, start: float, role: str, term: int, group: str | None, length: float = 1.0) -> RoleSpan:
    return RoleSpan(node, int(start * NS), int((start + length) * NS), role, term, None, "journal", group)


def test_elections_are_counted_per_group_and_the_cluster_count_ignores_groups() -> None:
    spans = [
        _span("n1", 1.0, "leader", 5, None),
        _span("n1", 2.0, "leader", 1, "shard-0"),
        _span("n2", 4.0, "leader", 2, "shard-0"),
        _span("n3", 5.0, "candidate", 3, "shard-0"),  # started, never won
        _span("n2", 3.0, "leader", 1, "shard-1"),
    ]
    assert count_elections(spans, 30 * NS).won == 1
    per_group = count_group_elections(spans, 30 * NS)
    assert {g: (e.won, e.unwon) for g, e in per_group.items()} == {"shard-0": (2, 1), "shard-1": (1, 0)}
    assert groups_sentence(per_group, ["shard-0", "shard-1"]) == (
        "Elections per group (2 groups, 3 in all, 6.0 per minute): shard-0 2, shard-1 1; each has a lane.")
    assert count_group_elections([s for s in spans if s.group is None], 30 * NS) == {}


def test_many_groups_are_collapsed_to_the_busiest_lanes() -> None:
    spans = [_span("n1", float(i), "leader", term, f"g{i:02d}") for i in range(12) for term in range(1, i + 2)]
    drawn = busiest_groups(spans)
    assert len(drawn) == MAX_GROUP_LANES and drawn == sorted(f"g{i:02d}" for i in range(4, 12))
    sentence = groups_sentence(count_group_elections(spans, 60 * NS), drawn)
    assert "12 groups" in sentence and "and 4 more" in sentence and "the 8 with the most leaderships" in sentence


def test_the_groups_left_out_of_the_main_figure_are_drawn_in_the_folded_one() -> None:
    from harness.report.faults import fault_view

    faults = fault_view([], ["n1"], 20 * NS)
    scale = Scale(0, 20 * NS, 112, 1226)
    spans = [_span("n1", float(i), "leader", 1, f"g{i:02d}") for i in range(MAX_GROUP_LANES + 3)]
    folded = all_group_lanes(spans, faults, scale)
    assert folded is not None
    markup = str(folded.markup())
    assert all(f"g{i:02d}: n1 leader term 1" in markup for i in range(MAX_GROUP_LANES + 3))
    assert all_group_lanes(spans[:MAX_GROUP_LANES], faults, scale) is None  # every lane is in the main figure


def test_groups_are_named_in_natural_order() -> None:
    assert sorted(["shard-10", "shard-2", "q", "shard-1"], key=group_order) == ["q", "shard-1", "shard-2", "shard-10"]


def test_a_group_lane_shows_its_leaders_and_two_at_once() -> None:
    spans = [_span("n1", 1.0, "leader", 1, "shard-0", 4.0), _span("n2", 3.0, "leader", 1, "shard-0", 4.0),
             _span("n3", 1.0, "follower", 1, "shard-0", 8.0)]
    svg = Svg(1240)
    bottom = _draw_group_lanes(svg, Scale(0, 10 * NS, 112, 1226), spans, ["shard-0"], 30.0)
    markup = str(svg.markup())
    assert bottom > 30.0 and "shard-0" in markup
    assert "shard-0: n1 leader term 1" in markup
    assert "shard-0: n2 leader term 1" in markup and "at the same time as another leader of the group" in markup
    assert "n3" not in markup  # followers are not drawn in a group's lane


def test_the_leader_counterexample_of_a_group_names_the_group() -> None:
    from checkers.leader import check_single_leader_per_term
    from harness.report.counterexamples import anomaly_time, checker_view
    from harness.report.faults import fault_view
    from tests.checkers.scenario import JournalBuilder, journals

    n1, n2 = JournalBuilder("n1"), JournalBuilder("n2")
    for term in (3, 4):
        n1.add("role", role="leader", term=term, leader="n1", group="shard-1")
        n2.add("role", role="leader", term=term, leader="n2", group="shard-1")
    n1.add("role", role="leader", term=3, leader="n1")  # the cluster-level group's term 3: fine
    verdict = check_single_leader_per_term(journals(n1, n2), None).to_json()
    view = checker_view("single-leader-per-term", verdict, None, fault_view([], ["n1", "n2"], 10 * NS), 10 * NS)
    assert view.kind == "leader"
    assert view.tables[0].title == "Claims to lead term 3 of group shard-1"
    assert view.tables[1].title == "Every (group, term) with more than one leader"
    assert "the leaders of term 3 of group shard-1" in str(view.figure)
    found = anomaly_time(verdict["counterexample"], Alignment(origin=999.0, uncertainty=0.0, method="exact"))
    assert found is not None and found[1] == "two leaders of term 3 of group shard-1"
