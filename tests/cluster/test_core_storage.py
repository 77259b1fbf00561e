"""Storage records and recovery."""

from __future__ import annotations

import pytest

from cluster.core.storage import StorageError, recover


def e(term: int, seq: int) -> dict:
    return {"lsn": [term, seq], "f": "noop", "key": None, "time": 0.0}


def test_recover_replays_terms_votes_appends_truncations_and_marks() -> None:
    state = recover([
        {"t": "term", "term": 1, "vote": "n1"},
        {"t": "leader", "term": 1},
        {"t": "entries", "from": 1, "entries": [e(1, 1), e(1, 2), e(1, 3)]},
        {"t": "applied", "index": 2},
        {"t": "term", "term": 2, "vote": None},
        {"t": "entries", "from": 3, "entries": [e(2, 1)]},
        {"t": "entries", "from": 4, "entries": []},
    ])
    assert (state.term, state.vote, state.leader_term, state.applied_index, state.records) == (2, None, 1, 2, 7)
    assert [x["lsn"] for x in state.entries] == [[1, 1], [1, 2], [2, 1]]


def test_an_empty_disk_is_a_fresh_node() -> None:
    state = recover([])
    assert (state.term, state.vote, state.entries, state.applied_index, state.leader_term) == (0, None, [], 0, None)


def test_applied_never_exceeds_the_log() -> None:
    state = recover([{"t": "entries", "from": 1, "entries": [e(1, 1), e(1, 2)]}, {"t": "applied", "index": 2},
                     {"t": "entries", "from": 2, "entries": []}])
    assert state.applied_index == 1


@pytest.mark.parametrize("record, fragment", [
    ({"t": "what"}, "unknown record type 'what'"),
    ({"t": "term", "term": "1", "vote": None}, "term must be an int"),
    ({"t": "entries", "from": 3, "entries": []}, "does not continue a log of 0 entries"),
    ({"t": "applied"}, "'index'"),
    ("not a dict", "unknown record type None"),
])
def test_a_malformed_record_is_named(record: object, fragment: str) -> None:
    with pytest.raises(StorageError, match="storage record 1 is malformed") as info:
        recover([{"t": "term", "term": 1, "vote": None}, record])
    assert fragment in str(info.value)
