"""The plumbing the ``harness`` commands share: argument types with one-sentence errors, and the exit
codes ``run_command`` gives to usage errors, bad input, Ctrl-C and crashes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest

from harness import subcommand
from harness.subcommand import CommandParser, fault_packages, run_command


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (subcommand.seconds, "2.5", 2.5),
        (subcommand.seconds_or_no_limit, "0", 0.0),
        (subcommand.count, "1", 1),
        (subcommand.count_or_zero, "0", 0),
        (subcommand.rate, "0", None),
        (subcommand.rate, "4", 4.0),
        (subcommand.port, "0", 0),
        (subcommand.port, "65535", 65535),
    ],
)
def test_argument_types_accept_their_range(parse: Callable[[str], Any], text: str, expected: Any) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (subcommand.seconds, "soon", "'soon' is not a number of seconds"),
        (subcommand.seconds, "0", "'0' must be positive"),
        (subcommand.seconds_or_no_limit, "-1", "'-1' must not be negative (0: no limit)"),
        (subcommand.count, "0", "'0' must be at least 1"),
        (subcommand.count, "1.5", "'1.5' is not a whole number"),
        (subcommand.count_or_zero, "-1", "'-1' must not be negative"),
        (subcommand.rate, "-1", "'-1' must not be negative (0: no pause between operations)"),
        (subcommand.rate, "fast", "'fast' is not a number of operations per second"),
        (subcommand.port, "65536", "'65536' is not a port number (0 to 65535; 0: any free port)"),
        (subcommand.port, "http", "'http' is not a port number"),
    ],
)
def test_argument_types_reject_with_one_sentence(parse: Callable[[str], Any], text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse(text)
    assert str(caught.value) == message


def test_fault_packages_drop_blanks_and_none() -> None:
    assert fault_packages(" partition, kill ,,none") == ("partition", "kill")
    assert fault_packages("none") == ()


class BadInput(Exception):
    """Stands for ConfigError: a sentence about the configuration."""


def _parser(handler: Callable[..., int]) -> CommandParser:
    parser = CommandParser(prog="harness")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser, metavar="COMMAND")
    go = commands.add_parser("go")
    go.add_argument("--times", type=subcommand.count, default=1)
    go.set_defaults(handler=handler)
    return parser


def _raises(exc: BaseException) -> Callable[..., int]:
    def handler(args: argparse.Namespace, console: Any, err: Any) -> int:
        raise exc

    return handler


def test_the_handler_s_exit_code_is_returned(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[int] = []

    def handler(args: argparse.Namespace, console: Any, err: Any) -> int:
        seen.append(args.times)
        console.print("done")
        return 1

    assert run_command(_parser(handler), ["go", "--times", "3"]) == 1
    assert seen == [3] and capsys.readouterr().out == "done\n"


def test_what_a_command_prints_is_never_read_as_markup_or_emoji(capsys: pytest.CaptureFixture[str]) -> None:
    """A user's argument (``--image '[/]'``, a ``module:factory`` plugin name) printed by any command
    comes out as typed: Rich markup in it raised MarkupError (255) and ``:factory:`` became an emoji."""
    typed = "--image '[/]' --hosts hosts[/].txt --db nonexist.mod:factory [bold]x[/bold] :smile:"

    def handler(args: argparse.Namespace, console: Any, err: Any) -> int:
        console.print(f"run ({typed})")
        err.print(f"error: {typed}")
        return 0

    assert run_command(_parser(handler), ["go"]) == 0
    out, err = capsys.readouterr()
    assert out == f"run ({typed})\n" and err == f"error: {typed}\n"


@pytest.mark.parametrize(
    ("argv", "handler", "code", "said"),
    [
        (["go", "--times", "0"], _raises(AssertionError()), 254, "harness go: argument --times: '0' must be at least 1"),
        (["stop"], _raises(AssertionError()), 254, "invalid choice: 'stop'"),
        (["go"], _raises(BadInput("the store is gone")), 254, "harness go: the store is gone"),
        (["go"], _raises(KeyboardInterrupt()), 2, "interrupted"),
        (["go"], _raises(RuntimeError("boom")), 255, "the harness crashed (exit 255); the traceback is above"),
    ],
)
def test_what_escapes_a_command_becomes_its_exit_code(
    capsys: pytest.CaptureFixture[str], argv: list[str], handler: Callable[..., int], code: int, said: str
) -> None:
    assert run_command(_parser(handler), argv, bad_input=(BadInput,)) == code
    assert said in capsys.readouterr().err


def test_bad_input_not_named_is_a_crash(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command(_parser(_raises(BadInput("x"))), ["go"]) == 255
    assert "BadInput: x" in capsys.readouterr().err


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command(_parser(_raises(AssertionError())), ["go", "--help"]) == 0
    assert "--times" in capsys.readouterr().out
