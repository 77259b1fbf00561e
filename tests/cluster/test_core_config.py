"""NodeConfig validation, messages' wire form, and the error table."""

from __future__ import annotations

import pytest

from cluster.core.config import NodeConfig
from cluster.core.errors import ERRORS, error_reply
from cluster.core.messages import MESSAGE_TYPES, AppendEntries, MessageError, parse_message


def test_defaults_elect_within_a_few_seconds_and_derive_one_value_each() -> None:
    config = NodeConfig("n1", ("n2", "n3"))
    assert config.mode == "blazingmq" and config.fsync == "always" and config.bugs == frozenset()
    assert config.members == ("n1", "n2", "n3") and config.majority == 2
    assert config.election_timeout == pytest.approx(0.45)
    assert config.election_timeout + config.election_random_wait < 3.0
    assert NodeConfig("n1", ("n2", "n3", "n4")).majority == 3
    assert NodeConfig("n1", ()).majority == 1


@pytest.mark.parametrize("kwargs, fragment", [
    ({"mode": "paxos"}, "unknown mode 'paxos'; valid modes: blazingmq, raft"),
    ({"fsync": "sometimes"}, "unknown fsync policy 'sometimes'"),
    ({"peers": ("n1",)}, "must not list itself"),
    ({"peers": ("n2", "n2")}, "duplicates"),
    ({"heartbeat_interval": 0}, "heartbeat_interval must be > 0"),
    ({"missed_heartbeats": 0}, "missed_heartbeats must be an integer >= 1"),
    ({"dedup_window_unit": "hours"}, "unknown dedup_window_unit 'hours'"),
    ({"visibility_timeout": 0}, "visibility_timeout must be > 0"),
    ({"bugs": frozenset({"nope"})}, "unknown bug 'nope'"),
])
def test_bad_settings_get_one_line_errors(kwargs: dict, fragment: str) -> None:
    settings = {"node_id": "n1", "peers": ("n2",), **kwargs}
    with pytest.raises(ValueError) as info:
        NodeConfig(**settings)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_every_message_type_round_trips_and_names_itself() -> None:
    message = AppendEntries(term=3, prev_index=1, prev_lsn=[2, 4], commit_index=1,
                            entries=[{"lsn": [3, 1], "f": "noop", "key": None, "time": 0.0}])
    wire = message.to_wire()
    assert wire["type"] == "AppendEntries" and parse_message(wire) == message
    for name, cls in MESSAGE_TYPES.items():
        assert cls.__name__ == name and cls.doc, name


@pytest.mark.parametrize("wire, fragment", [
    ({"type": "LeaderHeartbeat", "term": 1, "commit_index": 0, "round": 1}, "lacks field 'commit_lsn'"),
    ({"type": "ElectionProposal", "term": True}, "bad value"),
    ({"type": "VoteResponse", "term": 1, "granted": "yes"}, "bad value"),
    ({"type": "Gossip", "term": 1}, "unknown message type 'Gossip'"),
    ({"type": "AppendEntries", "term": 1, "prev_index": 0, "prev_lsn": [0, 0], "commit_index": 0,
      "entries": [{"lsn": [1, 1], "f": "cas", "key": "x", "value": 3}]}, "entries has a bad value"),
    ({"type": "AppendEntries", "term": 1, "prev_index": 0, "prev_lsn": [0, 0], "commit_index": 0,
      "entries": [{"lsn": [1, 1], "f": "drop-table", "key": "x"}]}, "entries has a bad value"),
])
def test_malformed_messages_are_refused_with_the_reason(wire: dict, fragment: str) -> None:
    with pytest.raises(MessageError, match=fragment):
        parse_message(wire)


def test_error_replies_carry_the_certainty_of_their_code() -> None:
    assert error_reply(7, "leadership-lost", "m")["definite"] is False
    assert error_reply(7, "not-leader", "m", leader="n2") == {
        "id": 7, "ok": False, "error": "not-leader", "definite": True, "leader": "n2", "message": "m"}
    assert {code for code, spec in ERRORS.items() if not spec.definite} == {
        "leadership-lost", "internal-error", "timeout", "connection-lost"}
    with pytest.raises(KeyError):
        error_reply(1, "no-such-code", "m")
