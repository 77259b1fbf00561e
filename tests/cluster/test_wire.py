"""NDJSON framing: messages split across chunks, bad lines reported in place, the 1 MiB limit."""

import json

import pytest

from cluster.wire import (
    MAX_LINE_BYTES,
    LineDecoder,
    MalformedMessage,
    MessageTooLarge,
    WireError,
    decode,
    encode,
    error_reply,
    hello_peer_id,
    open_envelope,
    peer_envelope,
    peer_hello,
)


def test_encode_is_one_compact_line_that_decodes_back():
    message = {"id": 7, "op": "write", "key": "k", "value": "é"}
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line[:-1]) == message


def test_encode_refuses_a_message_over_the_limit():
    with pytest.raises(MessageTooLarge, match="exceeds the 10-byte line limit"):
        encode({"value": "x" * 20}, limit=10)


@pytest.mark.parametrize(
    "line, why",
    [
        (b"{not json", "not a JSON line"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b"\xff\xfe{}", "not a JSON line"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_decode_names_what_is_wrong(line, why):
    with pytest.raises(MalformedMessage, match=why):
        decode(line)


def test_messages_split_across_chunks_are_reassembled_in_order():
    stream = b"".join(encode({"id": i, "pad": "x" * i}) for i in range(50))
    decoder = LineDecoder()
    got = []
    for cut in range(0, len(stream), 7):
        got.extend(decoder.feed(stream[cut:cut + 7]))
    assert [m["id"] for m in got] == list(range(50))
    assert decoder.close() == []


def test_bad_lines_are_reported_in_place_and_the_stream_goes_on():
    decoder = LineDecoder()
    items = decoder.feed(b'{"id": 1}\nhello\n\n  \n[3]\n{"id": 2}\n')
    assert items[0] == {"id": 1}
    assert isinstance(items[1], MalformedMessage)
    assert isinstance(items[2], MalformedMessage)
    assert items[3] == {"id": 2}
    assert len(items) == 4  # blank lines are skipped


def test_an_oversized_line_in_one_chunk_is_one_error_then_decoding_resumes():
    decoder = LineDecoder(limit=100)
    items = decoder.feed(b'{"v": "' + b"x" * 200 + b'"}\n{"id": 3}\n')
    assert isinstance(items[0], MessageTooLarge)
    assert items[1:] == [{"id": 3}]


def test_an_oversized_line_over_many_chunks_is_reported_once_and_skipped_to_its_newline():
    decoder = LineDecoder(limit=100)
    items = []
    items += decoder.feed(b'{"id": 1}\n{"v": "')
    for _ in range(50):
        items += decoder.feed(b"y" * 64)  # never buffered beyond the limit
        assert decoder._pending_len <= 100 + 64
    items += decoder.feed(b'"}\n{"id": 2}\n')
    assert items[0] == {"id": 1}
    assert [type(i) for i in items[1:-1]] == [MessageTooLarge]
    assert items[-1] == {"id": 2}


def test_a_line_exactly_at_the_limit_is_accepted():
    body = json.dumps({"v": "z" * 50}).encode()
    decoder = LineDecoder(limit=len(body))
    assert decoder.feed(body + b"\n") == [{"v": "z" * 50}]
    assert isinstance(LineDecoder(limit=len(body) - 1).feed(body + b"\n")[0], MessageTooLarge)


def test_default_limit_is_one_mebibyte():
    assert MAX_LINE_BYTES == 1024 * 1024


def test_a_line_cut_off_by_the_end_of_the_stream_is_reported():
    decoder = LineDecoder()
    assert decoder.feed(b'{"id": 1}\n{"id": ') == [{"id": 1}]
    [error] = decoder.close()
    assert isinstance(error, MalformedMessage) and "closed in the middle" in str(error)


def test_error_reply_is_definite_and_carries_the_code():
    reply = error_reply(MessageTooLarge("too big"), request_id=None)
    assert reply == {"id": None, "ok": False, "error": "too-large", "definite": True, "leader": None,
                     "message": "too big"}
    assert error_reply(MalformedMessage("bad"), request_id=4)["error"] == "bad-request"
    assert isinstance(MalformedMessage("x"), WireError)


def test_peer_hello_and_envelope_round_trip():
    assert hello_peer_id(decode(encode(peer_hello("n2"))[:-1])) == "n2"
    assert hello_peer_id({"id": 1, "op": "status"}) is None
    with pytest.raises(MalformedMessage):
        hello_peer_id({"hello": "peer"})
    assert open_envelope(peer_envelope("n3", {"type": "LeaderHeartbeat", "term": 4})) == (
        "n3", {"type": "LeaderHeartbeat", "term": 4})
    with pytest.raises(MalformedMessage):
        open_envelope({"from": "n3", "msg": [1]})
