"""The command contract shared by the remotes: argv on the node, results, errors and timeouts."""

from __future__ import annotations

import pytest

from harness.remotes.command import KILL_AFTER_S, describe, finish, node_argv
from harness.remotes.ssh import known_hosts_line
from nemesis.remote import CommandResult, RemoteError, RemoteTimeout


def test_a_string_runs_under_sh_and_a_list_runs_as_given() -> None:
    assert node_argv("echo $HOME; true", None) == ["sh", "-c", "echo $HOME; true"]
    assert node_argv(["iptables", "-A", "INPUT"], None) == ["iptables", "-A", "INPUT"]


def test_a_timeout_is_enforced_on_the_node_by_coreutils_timeout() -> None:
    assert node_argv(["sleep", "9"], 2.5) == ["timeout", "-k", str(KILL_AFTER_S), "2.5", "sleep", "9"]


@pytest.mark.parametrize("bad", ["", "  ", [], ["ls", 3], None])
def test_malformed_commands_are_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        node_argv(bad, None)  # type: ignore[arg-type]


def test_non_positive_timeouts_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        node_argv("true", 0)


def test_success_returns_decoded_output() -> None:
    result = finish("n1", "true", 0, b"out\xff", None, elapsed=0.1, timeout=None, check=True)
    assert result == CommandResult(0, "out\ufffd", "")
    assert result.ok


def test_failure_raises_a_one_line_error_naming_node_command_exit_and_last_stderr_line() -> None:
    with pytest.raises(RemoteError) as raised:
        finish("n2", "iptables -A\nINPUT", 2, b"", b"first\nBad rule\n\n", elapsed=0.1, timeout=None, check=True)
    assert str(raised.value) == "n2: `iptables -A INPUT` exited 2: Bad rule"
    assert raised.value.result == CommandResult(2, "", "first\nBad rule\n\n")


def test_unchecked_failure_is_returned() -> None:
    result = finish("n1", "false", 1, b"", b"", elapsed=0.1, timeout=None, check=False)
    assert result.exit_code == 1 and not result.ok


@pytest.mark.parametrize("exit_code", [124, 137])
def test_timeout_exit_after_the_deadline_is_a_timeout_even_unchecked(exit_code: int) -> None:
    with pytest.raises(RemoteTimeout, match="n3: `sleep 9` was still running after 2 s"):
        finish("n3", ["sleep", "9"], exit_code, b"", b"", elapsed=2.01, timeout=2, check=False)


def test_exit_124_before_the_deadline_is_the_command_s_own_exit_code() -> None:
    result = finish("n1", "exit 124", 124, b"", b"", elapsed=0.2, timeout=5, check=False)
    assert result.exit_code == 124


def test_long_commands_are_shortened_in_messages() -> None:
    assert len(describe("x" * 500)) == 80 and describe("x" * 500).endswith("...")


def test_known_hosts_line_uses_the_bracketed_form_for_other_ports() -> None:
    key = "ssh-ed25519 AAAAC3Nza root@n1\n"
    assert known_hosts_line("10.0.0.5", key) == "10.0.0.5 ssh-ed25519 AAAAC3Nza\n"
    assert known_hosts_line("10.0.0.5", key, port=2222) == "[10.0.0.5]:2222 ssh-ed25519 AAAAC3Nza\n"
    with pytest.raises(ValueError, match="ssh-ed25519 AAAA"):
        known_hosts_line("h", "garbage")
