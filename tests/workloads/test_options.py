"""Workload options (``harness run --workload-opt NAME=VALUE``, a suite's ``workload_options``): each
workload declares what a user may set; text is parsed to the declared type, an undeclared name or a value of
the wrong type is refused with a sentence naming it, and the constructor takes every declared option."""

from __future__ import annotations

import inspect
import random

import pytest

from workloads.generator import (
    WORKLOADS,
    check_workload_options,
    make_workload,
    parse_workload_options,
    workload_names,
    workload_options,
)


@pytest.mark.parametrize("name", workload_names())
def test_every_declared_option_is_a_constructor_keyword_and_reaches_the_workload(name: str) -> None:
    parameters = inspect.signature(WORKLOADS[name]).parameters
    options = workload_options(name)
    assert options, f"workload {name} declares no option"
    for option in options:
        assert option.name in parameters and option.name != "rate", (name, option.name)
        default = parameters[option.name].default
        assert option.kind is type(default) or (option.kind is float and isinstance(default, int | float)), option
        assert f"default {default:g}" in option.help, option.help  # the help states the constructor's default
    text = [f"{o.name}={'2' if o.kind is int else '0.25'}" for o in options]
    given = parse_workload_options(name, text)
    workload = make_workload(name, random.Random(1), **given)
    assert all(getattr(workload, key) == value for key, value in given.items())


def test_text_is_parsed_to_the_declared_type_and_the_last_pair_wins() -> None:
    assert parse_workload_options("queue", ["queues=3", "put_fraction=1", "queues= 4 "]) == {
        "queues": 4, "put_fraction": 1.0}
    assert parse_workload_options("log", []) == {}


@pytest.mark.parametrize(("pairs", "message"), [
    (["queues"], "write NAME=VALUE"),
    (["=3"], "write NAME=VALUE"),
    (["rate=3"], "workload queue has no option 'rate'; its options: queues, put_fraction, confirm_probability"),
    (["queues=1.5"], "queues must be a whole number, not '1.5'"),
    (["put_fraction=half"], "put_fraction must be a number, not 'half'"),
    (["put_fraction=inf"], "put_fraction must be a finite number"),
])
def test_bad_pairs_are_refused_naming_the_pair(pairs: list[str], message: str) -> None:
    with pytest.raises(ValueError, match="--workload-opt") as error:
        parse_workload_options("queue", pairs)
    assert message in str(error.value)


def test_stored_options_are_checked_by_name_and_type() -> None:
    check_workload_options("register", {"keys": 2, "rotate_after": 10})
    check_workload_options("queue", {"put_fraction": 1})  # a float option takes a whole number
    with pytest.raises(ValueError, match="has no option 'queues'"):
        check_workload_options("register", {"queues": 2})
    with pytest.raises(ValueError, match="keys must be a whole number, not True"):
        check_workload_options("log", {"keys": True})
    check_workload_options("no-such-workload", {"x": 1})  # the name is refused when the workload is made
