"""The log checker on a hand-written corpus: one history per anomaly class, and valid ones."""

from __future__ import annotations

from typing import Any

from checkers.log import check_log
from checkers.registry import CheckInput, applicable, run_checker
from checkers.verdict import UNKNOWN
from tests.checkers.scenario import HistoryBuilder

NODES = ("n1", "n2", "n3")


def append(b: HistoryBuilder, process: int, key: str, value: int, offset: int | None, *, type: str = "ok",
           node: str = "n1") -> int:
    """An append invoked and completed at once; returns the completion's line."""
    b.invoke(process, "append", key, value)
    result = [offset, value] if type == "ok" and offset is not None else value
    return b.complete(process, type, "append", key, result, node=node)


def poll(b: HistoryBuilder, process: int | str, key: str, start: int | None, records: list[list[Any]] | None, *,
         type: str = "ok", node: str = "n1", final: bool | None = None) -> int:
    b.invoke(process, "poll", key, start, node=node, final=final)
    return b.complete(process, type, "poll", key, records if type == "ok" else None, node=node)


def final_reads(b: HistoryBuilder, key: str, records: dict[str, list[list[Any]]], first_process: int = 100) -> None:
    """Each node's final polls of ``key``: from 0 (all of ``records[node]``), then an empty poll past it."""
    for i, (node, mine) in enumerate(records.items()):
        process = first_process + i
        poll(b, process, key, 0, mine, node=node, final=True)
        end = max((r[0] for r in mine), default=-1) + 1
        poll(b, process, key, end, [], node=node, final=True)


def everywhere(records: list[list[Any]]) -> dict[str, list[list[Any]]]:
    return {node: records for node in NODES}


def kinds(verdict) -> dict[str, int]:
    return verdict.counterexample["counts"] if verdict.counterexample else {}


# -- valid histories ---------------------------------------------------------------------------------


def test_appends_read_in_order_by_concurrent_consumers_are_valid() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    b.invoke(1, "append", "l0", 1_000_001)  # concurrent with a poll
    poll(b, 2, "l0", 0, [[0, 1]])
    b.complete(1, "ok", "append", "l0", [1, 1_000_001])
    poll(b, 3, "l0", 0, [[0, 1], [1, 1_000_001]])  # a second consumer
    poll(b, 2, "l0", 1, [[1, 1_000_001]])
    poll(b, 2, "l0", 2, [])  # an empty poll past the end
    final_reads(b, "l0", everywhere([[0, 1], [1, 1_000_001]]))
    verdict = check_log(b.history())
    assert verdict.valid is True, verdict.summary
    assert verdict.stats["complete_final_reads"] == 3 and verdict.stats["acknowledged"] == 2
    assert verdict.summary.startswith("no anomaly in 2 appends (2 acknowledged) and 10 polls over 1 log")


def test_info_appends_may_or_may_not_have_happened_and_failed_ones_did_not() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 1, "l0", 1_000_001, None, type="info")  # happened: read later
    append(b, 2, "l0", 2_000_001, None, type="info")  # never happened
    append(b, 3, "l0", 3_000_001, None, type="fail")
    poll(b, 4, "l0", 0, [[0, 1], [1, 1_000_001]])
    final_reads(b, "l0", everywhere([[0, 1], [1, 1_000_001]]))
    assert check_log(b.history()).valid is True


def test_an_empty_log_read_empty_everywhere_is_valid_and_offsets_need_not_start_at_zero() -> None:
    b = HistoryBuilder()
    poll(b, 0, "l1", 0, [])
    append(b, 1, "l0", 5, 1)  # a system whose offsets start at 1
    append(b, 1, "l0", 6, 4)  # and are sparse
    poll(b, 2, "l0", 0, [[1, 5], [4, 6]])
    final_reads(b, "l0", everywhere([[1, 5], [4, 6]]))
    final_reads(b, "l1", everywhere([]))
    verdict = check_log(b.history())
    assert verdict.valid is True, verdict.summary


def test_a_poll_that_does_not_say_where_it_read_from_is_judged_against_the_process_previous_poll() -> None:
    b = HistoryBuilder()
    for offset in range(4):
        append(b, 0, "l0", offset + 1, offset)
    poll(b, 1, "l0", None, [[0, 1], [1, 2]])
    poll(b, 1, "l0", None, [[2, 3], [3, 4]])
    final_reads(b, "l0", everywhere([[i, i + 1] for i in range(4)]))
    assert check_log(b.history()).valid is True


def test_nothing_to_judge_and_no_final_phase_are_unknown() -> None:
    b = HistoryBuilder()
    b.op(0, "read", "k0", output=None)
    assert check_log(b.history()).valid == UNKNOWN
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    poll(b, 1, "l0", 0, [[0, 1]])
    verdict = check_log(b.history())
    assert verdict.valid == UNKNOWN and "without a final phase" in verdict.summary


def test_a_log_no_node_read_to_the_end_is_unknown() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    poll(b, 100, "l0", 0, [[0, 1]], final=True)
    poll(b, 100, "l0", 1, None, type="fail", final=True)
    verdict = check_log(b.history())
    assert verdict.valid == UNKNOWN and "no node's final polls read l0 to the end" in verdict.summary


# -- one history per anomaly class -------------------------------------------------------------------


def test_an_acknowledged_append_missing_from_a_final_read_is_lost() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    acked = append(b, 1, "l0", 1_000_001, 1, node="n2")
    final_reads(b, "l0", {"n1": [[0, 1], [1, 1_000_001]], "n2": [[0, 1]], "n3": [[0, 1]]})
    verdict = check_log(b.history())
    assert verdict.valid is False
    assert kinds(verdict) == {"lost": 1}
    (lost,) = verdict.counterexample["log_anomalies"]["lost"]
    assert (lost["key"], lost["value"], lost["offset"], lost["missing_on"]) == ("l0", 1_000_001, 1, ["n2", "n3"])
    assert lost["acked_line"] == acked and lost["append"]["complete_line"] == acked
    assert verdict.summary.startswith("1 lost in 2 appends")
    assert f"l0 append of 1000001 acknowledged at offset 1 (line {acked}, by n2)" in verdict.summary
    assert "missing from the final polls of n2, n3" in verdict.summary


def test_an_acknowledgement_without_an_offset_is_lost_when_no_final_read_holds_it() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    b.invoke(1, "append", "l0", 1_000_001)
    b.complete(1, "ok", "append", "l0", None)  # acknowledged, no offset (the ack-before-commit bug)
    final_reads(b, "l0", everywhere([[0, 1]]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"lost": 1}
    assert verdict.stats["acks_without_offset"] == 1
    assert "acknowledged without an offset" in verdict.summary


def test_one_value_at_two_offsets_is_duplicated() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    poll(b, 1, "l0", 0, [[0, 1], [1, 1]])  # a retried append stored twice
    final_reads(b, "l0", everywhere([[0, 1], [1, 1]]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"duplicated": 1}
    (dup,) = verdict.counterexample["log_anomalies"]["duplicated"]
    assert dup["offsets"] == [0, 1] and dup["value"] == 1


def test_two_values_at_one_offset_are_inconsistent_offsets() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    first = append(b, 1, "l0", 1_000_001, 1)
    second = append(b, 2, "l0", 2_000_001, 1)  # the same offset handed out twice
    final_reads(b, "l0", everywhere([[0, 1], [1, 1_000_001], [2, 2_000_001]]))
    verdict = check_log(b.history())
    assert kinds(verdict)["inconsistent-offsets"] == 1
    (bad,) = verdict.counterexample["log_anomalies"]["inconsistent-offsets"]
    assert bad["offset"] == 1 and {v["value"] for v in bad["values"]} == {1_000_001, 2_000_001}
    lines = {s["line"] for v in bad["values"] for s in v["seen"]}
    assert {first, second} <= lines
    # 2000001 also sits at offset 2 in the final reads: one value at two offsets
    assert kinds(verdict)["duplicated"] == 1


def test_readers_that_disagree_about_an_offset_are_inconsistent() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 1, "l0", 1_000_001, None, type="info")
    poll(b, 2, "l0", 0, [[0, 1], [1, 1_000_001]], node="n1")
    poll(b, 3, "l0", 0, [[0, 1]], node="n2")  # fine: shorter
    final_reads(b, "l0", everywhere([[0, 1], [1, 1_000_001]]))
    assert check_log(b.history()).valid is True
    b2 = HistoryBuilder()
    append(b2, 0, "l0", 1, 0)
    append(b2, 1, "l0", 1_000_001, None, type="info")
    append(b2, 4, "l0", 4_000_001, None, type="info")
    poll(b2, 2, "l0", 0, [[0, 1], [1, 1_000_001]], node="n1")
    poll(b2, 3, "l0", 1, [[1, 4_000_001]], node="n2")  # another record at offset 1
    final_reads(b2, "l0", everywhere([[0, 1], [1, 1_000_001]]))
    verdict = check_log(b2.history())
    assert kinds(verdict) == {"inconsistent-offsets": 1, "unstable": 1}


def test_an_append_acknowledged_below_an_earlier_acknowledged_offset_is_reordered() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 5)
    append(b, 1, "l0", 1_000_001, 3)  # invoked after offset 5 was acknowledged
    final_reads(b, "l0", everywhere([[3, 1_000_001], [5, 1]]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"reordered": 1}
    (bad,) = verdict.counterexample["log_anomalies"]["reordered"]
    assert (bad["offset"], bad["earlier_offset"]) == (3, 5)


def test_concurrent_appends_may_get_offsets_in_either_order() -> None:
    b = HistoryBuilder()
    b.invoke(0, "append", "l0", 1)
    b.invoke(1, "append", "l0", 1_000_001)
    b.complete(0, "ok", "append", "l0", [1, 1])
    b.complete(1, "ok", "append", "l0", [0, 1_000_001])
    final_reads(b, "l0", everywhere([[0, 1_000_001], [1, 1]]))
    assert check_log(b.history()).valid is True


def test_polls_that_go_backwards_are_nonmonotonic() -> None:
    b = HistoryBuilder()
    for offset in range(3):
        append(b, 0, "l0", offset + 1, offset)
    poll(b, 1, "l0", 0, [[1, 2], [0, 1]])  # out of order within one poll
    poll(b, 2, "l0", 2, [[1, 2], [2, 3]])  # below the offset asked for
    poll(b, 3, "l0", None, [[1, 2], [2, 3]])
    poll(b, 3, "l0", None, [[2, 3]])  # no offset asked: starts where the previous ended
    final_reads(b, "l0", everywhere([[0, 1], [1, 2], [2, 3]]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"nonmonotonic-poll": 3}
    explanations = [r["explanation"] for r in verdict.counterexample["log_anomalies"]["nonmonotonic-poll"]]
    assert "returned offset 0 after offset 1" in explanations[0]
    assert "a poll from offset 2" in explanations[1] and "returned offset 1" in explanations[1]
    assert "process 3 polled offset 2" in explanations[2]


def test_a_poll_that_jumps_over_existing_offsets_skips() -> None:
    b = HistoryBuilder()
    for offset in range(4):
        append(b, 0, "l0", offset + 1, offset)
    poll(b, 1, "l0", 0, [[1, 2]])  # skips offset 0
    poll(b, 2, "l0", 0, [[0, 1], [2, 3]])  # skips offset 1 between two records
    poll(b, 3, "l0", None, [[0, 1]])
    poll(b, 3, "l0", None, [[3, 4]])  # skips 1 and 2 after its previous poll
    final_reads(b, "l0", everywhere([[i, i + 1] for i in range(4)]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"skip": 3}
    skipped = [r["skipped"] for r in verdict.counterexample["log_anomalies"]["skip"]]
    assert skipped == [[0], [1], [1, 2]]


def test_gaps_nobody_saw_are_not_skips() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 0, "l0", 2, 7)  # offsets 1..6 never seen by anyone (sparse offsets)
    poll(b, 1, "l0", 0, [[0, 1], [7, 2]])
    poll(b, 2, "l0", 3, [[7, 2]])
    final_reads(b, "l0", everywhere([[0, 1], [7, 2]]))
    assert check_log(b.history()).valid is True


def test_a_record_read_that_the_final_reads_lack_is_unstable() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 1, "l0", 1_000_001, None, type="info")
    read = poll(b, 2, "l0", 0, [[0, 1], [1, 1_000_001]])  # served past the commit point
    final_reads(b, "l0", everywhere([[0, 1]]))  # and truncated by a leader change
    verdict = check_log(b.history())
    assert kinds(verdict) == {"unstable": 1}
    (gone,) = verdict.counterexample["log_anomalies"]["unstable"]
    assert gone["offset"] == 1 and gone["read_line"] == read
    assert gone["final_at_offset"] == dict.fromkeys(NODES)
    assert "but the final polls show at offset 1 n1: nothing" in verdict.summary


def test_a_final_read_taken_before_a_record_was_first_read_does_not_make_it_unstable() -> None:
    # An info append committed during the final phase: n1's final read ended before it appeared.
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 1, "l0", 1_000_001, None, type="info")
    final_reads(b, "l0", {"n1": [[0, 1]]}, first_process=100)
    final_reads(b, "l0", {"n2": [[0, 1], [1, 1_000_001]], "n3": [[0, 1], [1, 1_000_001]]}, first_process=200)
    assert check_log(b.history()).valid is True


def test_a_value_nobody_appended_or_whose_append_failed_is_a_phantom() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 1, "l0", 1_000_001, None, type="fail")
    poll(b, 2, "l0", 0, [[0, 1], [1, 1_000_001], [2, 99]])
    final_reads(b, "l0", everywhere([[0, 1], [1, 1_000_001], [2, 99]]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"phantom": 2}
    whys = sorted(r["why"] for r in verdict.counterexample["log_anomalies"]["phantom"])
    assert whys == ["every append of it failed (definitely not appended)", "no append of this log attempted it"]


def test_the_counterexample_carries_a_timeline_of_the_flagged_log() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    append(b, 1, "l0", 1_000_001, 1)
    append(b, 3, "l0", 3_000_001, None, type="info")
    poll(b, 2, "l0", 0, [[0, 1], [1, 1_000_001], [2, 3_000_001]])
    final_reads(b, "l0", everywhere([[0, 1]]))
    verdict = check_log(b.history())
    assert kinds(verdict) == {"lost": 1, "unstable": 1}
    (panel,) = verdict.counterexample["timeline"]
    assert panel["key"] == "l0"
    assert {kind for _, _, kind in panel["points"]} == {"ack", "poll", "final"}
    assert {kind for _, _, kind in panel["anomalies"]} == {"lost", "unstable"}


def test_registry_applies_the_log_checker_only_to_log_histories() -> None:
    b = HistoryBuilder()
    append(b, 0, "l0", 1, 0)
    final_reads(b, "l0", everywhere([[0, 1]]))
    inp = CheckInput(history=b.history(), model="log")
    assert applicable(inp) == ["log"]
    assert run_checker("log", inp).valid is True
    r = HistoryBuilder()
    r.op(0, "write", "k0", 1)
    assert "log" not in applicable(CheckInput(history=r.history(), model="cas-register"))
