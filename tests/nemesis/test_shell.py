"""The shell fault implementations, against a fake Remote that records commands and fakes outputs.

The fake keeps the node's files (what ``write_file`` wrote) and answers the libfaketime probe from the
control file it holds, so clock tests see exactly what a node would report; a real-process test at the
end runs the clock faults against this machine's own shell with the real libfaketime.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from nemesis import grudge as g
from nemesis import shell
from nemesis.remote import CommandResult, RemoteError, RemoteTimeout
from nemesis.shell import FakeTime, Outcome, ShellClocks, ShellNet
from tests.local_remote import LocalRemote

FIVE = ["n1", "n2", "n3", "n4", "n5"]
ADDRESSES = {f"n{i}": f"10.55.0.{10 + i}" for i in range(1, 6)}
FT = FakeTime()
PID_FILE = "/var/lib/cluster/node.pid"

Responder = CommandResult | Callable[[str], CommandResult]


class FakeRemote:
    """A node that records every command and file write; ``respond(marker, result)`` fakes outputs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.commands: list[str] = []
        self.writes: list[tuple[str, bytes, int]] = []
        self.uploads: list[tuple[str, str]] = []
        self.files: dict[str, bytes] = {}
        self.responses: list[tuple[str, Responder]] = []
        self.faketime_works = True
        self.gone = False

    def respond(self, marker: str, result: Responder) -> None:
        self.responses.append((marker, result))

    def run(
        self, cmd: str, *, timeout: float | None = None, check: bool = True, user: str | None = None
    ) -> CommandResult:
        if self.gone:
            raise RemoteError(self.name, "cannot reach the node")
        assert isinstance(cmd, str) and timeout is not None and check is False
        self.commands.append(cmd)
        for marker, result in self.responses:
            if marker in cmd:
                return result(cmd) if callable(result) else result
        if "date +%s.%N" in cmd:
            return self._probe(cmd)
        cat = re.search(r"then cat (\S+);", cmd)
        if cat:
            return CommandResult(0, self.files.get(cat.group(1), b"+0 x1\n").decode(), "")
        return CommandResult(0, "", "")

    def _probe(self, cmd: str) -> CommandResult:
        control = re.search(r"FAKETIME_TIMESTAMP_FILE=(\S+)", cmd).group(1)
        offset = shell.parse_control_line(self.files[control].decode()) if control in self.files else 0.0
        skewed = 1000.0005 + (offset if self.faketime_works else 0.0)
        return CommandResult(0, f"1000.000000000\n{skewed:.9f}\n1000.001000000\n", "")

    def write_file(self, remote_path: str, data: bytes, mode: int = 0o644) -> None:
        if self.gone:
            raise RemoteError(self.name, "cannot reach the node")
        self.writes.append((remote_path, data, mode))
        self.files[remote_path] = data

    def read_file(self, remote_path: str) -> bytes:
        return self.files[remote_path]

    def upload(self, local_path: object, remote_path: str) -> None:
        self.uploads.append((str(local_path), remote_path))

    def download(self, remote_path: str, local_path: object) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


@pytest.fixture
def remotes() -> dict[str, FakeRemote]:
    return {name: FakeRemote(name) for name in FIVE}


def _cut_from(address: str) -> str:
    """The rule by which a node stops receiving from ``address`` (no request/response ports): only what
    belongs to flows ``address`` opened (conntrack's ORIGINAL direction), established ones included."""
    return f"iptables -w -A CHAOS -s {address} -m conntrack --ctdir ORIGINAL -j DROP"


def test_partition_installs_drop_rules_in_the_chaos_chain(remotes: dict[str, FakeRemote]) -> None:
    grudge = g.halves(FIVE)  # n1, n2 | n3, n4, n5
    outcome = shell.partition(remotes, grudge, ADDRESSES, "halves")
    assert outcome == Outcome({"kind": "halves", "grudge": g.to_json(grudge)}, None)
    assert remotes["n1"].commands == [
        "set -e\n"
        "iptables -w -N CHAOS 2>/dev/null || true\n"
        "iptables -w -C INPUT -j CHAOS 2>/dev/null || iptables -w -I INPUT 1 -j CHAOS\n"
        "iptables -w -F CHAOS\n"
        + "\n".join(_cut_from(a) for a in ("10.55.0.13", "10.55.0.14", "10.55.0.15"))
    ]
    assert remotes["n4"].commands[0].endswith(
        "iptables -w -F CHAOS\n"
        + _cut_from("10.55.0.11") + "\n" + _cut_from("10.55.0.12")
    )


def test_one_way_partition_only_blocks_the_receiving_side(remotes: dict[str, FakeRemote]) -> None:
    outcome = shell.partition(remotes, g.one_way("n1", ["n2"]), ADDRESSES, "one-way")
    assert outcome.applied
    assert remotes["n2"].commands[0].endswith(_cut_from("10.55.0.11"))
    # n1 still hears n2: its chain is flushed and left empty.
    assert remotes["n1"].commands[0].endswith("iptables -w -F CHAOS")
    assert outcome.value["grudge"]["n1"] == [] and outcome.value["grudge"]["n2"] == ["n1"]


def test_every_edge_of_a_two_way_grudge_is_enforced_at_its_receiver_by_direction(
    remotes: dict[str, FakeRemote],
) -> None:
    grudge = g.isolate(FIVE, "n3")
    outcome = shell.partition(remotes, grudge, ADDRESSES, "isolate")
    assert outcome.applied
    for node in FIVE:
        rules = [line for line in remotes[node].commands[0].splitlines() if line.startswith("iptables -w -A")]
        expected = [_cut_from(ADDRESSES[other]) for other in sorted(grudge[node])]
        assert rules == expected, node
        # Never a plain DROP of a whole source: that would cut the receiver's own connections too.
        assert all("--ctdir ORIGINAL" in rule for rule in rules)


def test_heal_flushes_exactly_the_chain_a_partition_filled(remotes: dict[str, FakeRemote]) -> None:
    shell.partition(remotes, g.one_way("n1", ["n2"]), ADDRESSES, "one-way")
    added = [line for line in remotes["n2"].commands[0].splitlines() if " -A " in line or " -I " in line]
    assert all(" CHAOS" in line for line in added)
    assert shell.heal(remotes).applied
    assert "iptables -w -F CHAOS" in remotes["n2"].commands[-1]


def test_a_cut_off_node_also_loses_the_replies_of_request_response_services() -> None:
    lines = shell.partition_commands(["10.55.0.11"], reply_ports=[7101, 7100, 7100])
    assert lines[-2:] == [
        "iptables -w -A CHAOS -s 10.55.0.11 -p tcp -m multiport --sports 7100,7101 -j DROP",
        "iptables -w -A CHAOS -s 10.55.0.11 -m conntrack --ctdir ORIGINAL -j DROP",
    ]
    # The shell nemesis passes its reply ports to every partition it applies.
    remotes = {name: FakeRemote(name) for name in FIVE}
    ShellNet(remotes, ADDRESSES, reply_ports=(7100,)).partition(g.isolate(FIVE, "n1"), "isolate")
    assert "-s 10.55.0.11 -p tcp -m multiport --sports 7100 -j DROP" in remotes["n3"].commands[0]


def test_a_node_that_refuses_rules_is_left_out_of_the_applied_grudge(remotes: dict[str, FakeRemote]) -> None:
    remotes["n2"].respond(
        "iptables",
        CommandResult(4, "", "iptables v1.8.9: can't initialize iptables table `filter': Permission denied"),
    )
    outcome = shell.partition(remotes, g.isolate(FIVE, "n1"), ADDRESSES, "isolate")
    assert outcome.type == "info"
    assert (
        outcome.error
        == "n2: iptables failed: iptables v1.8.9: can't initialize iptables table `filter': Permission denied"
    )
    assert "n2" not in outcome.value["grudge"] and outcome.value["grudge"]["n1"] == ["n2", "n3", "n4", "n5"]


def test_heal_flushes_the_partition_chain_where_it_exists(remotes: dict[str, FakeRemote]) -> None:
    outcome = shell.heal(remotes)
    assert outcome == Outcome({"nodes": FIVE}, None)
    for remote in remotes.values():
        assert remote.commands == [
            "if iptables -w -n -L CHAOS >/dev/null 2>&1; then iptables -w -F CHAOS; fi"
        ]


def test_loss_uses_the_statistic_match_for_every_peer(remotes: dict[str, FakeRemote]) -> None:
    outcome = shell.loss(remotes, ["n3"], 0.2, ADDRESSES)
    assert outcome == Outcome({"nodes": ["n3"], "probability": 0.2}, None)
    assert remotes["n3"].commands[0].splitlines()[1:] == [
        "iptables -w -N CHAOS-LOSS 2>/dev/null || true",
        "iptables -w -C INPUT -j CHAOS-LOSS 2>/dev/null || iptables -w -I INPUT 1 -j CHAOS-LOSS",
        "iptables -w -F CHAOS-LOSS",
        *(
            f"iptables -w -A CHAOS-LOSS -s 10.55.0.{i} -m statistic --mode random --probability 0.2 -j DROP"
            for i in (11, 12, 14, 15)
        ),
    ]
    assert all(not remotes[n].commands for n in FIVE if n != "n3")
    assert shell.heal_loss(remotes).applied
    assert remotes["n1"].commands == [
        "if iptables -w -n -L CHAOS-LOSS >/dev/null 2>&1; then iptables -w -F CHAOS-LOSS; fi"
    ]


NETEM_MISSING = CommandResult(2, "", "Error: Specified qdisc kind is unknown.\n")


def test_latency_without_netem_is_recorded_unavailable_not_faked(remotes: dict[str, FakeRemote]) -> None:
    for remote in remotes.values():
        remote.respond("tc qdisc replace", NETEM_MISSING)
    outcome = shell.latency(remotes, ["n1", "n2"], 100.0, 20.0)
    assert remotes["n1"].commands == ["tc qdisc replace dev eth0 root netem delay 100ms 20ms"]
    assert outcome.value == {"nodes": [], "delay_ms": 100.0, "jitter_ms": 20.0, "unavailable": True}
    assert outcome.error == (
        "n1,n2: latency unavailable on this host: the kernel has no netem qdisc "
        "(tc: Specified qdisc kind is unknown)"
    )
    # Nothing else was tried in its place.
    assert all(len(r.commands) <= 1 for r in remotes.values())


def test_latency_with_netem_is_applied_and_other_tc_errors_are_errors(remotes: dict[str, FakeRemote]) -> None:
    remotes["n2"].respond("tc qdisc", CommandResult(1, "", 'Cannot find device "eth0"'))
    outcome = shell.latency(remotes, ["n1", "n2"], 50.0)
    assert remotes["n1"].commands == ["tc qdisc replace dev eth0 root netem delay 50ms"]
    assert outcome.value == {"nodes": ["n1"], "delay_ms": 50.0, "jitter_ms": 0.0}
    assert outcome.error == 'n2: tc failed: Cannot find device "eth0"'


def test_netem_available_probe(remotes: dict[str, FakeRemote]) -> None:
    assert shell.netem_available(remotes["n1"]) is None
    remotes["n2"].respond("tc", NETEM_MISSING)
    assert (
        shell.netem_available(remotes["n2"])
        == "the kernel has no netem qdisc (tc: Specified qdisc kind is unknown)"
    )
    remotes["n3"].respond("tc", CommandResult(127, "", "sh: 1: tc: not found"))
    assert shell.netem_available(remotes["n3"]) == "tc (iproute2) is not installed on the node"


def test_heal_latency_only_removes_a_netem_qdisc(remotes: dict[str, FakeRemote]) -> None:
    assert shell.heal_latency(remotes).applied
    assert remotes["n1"].commands == [
        "if tc qdisc show dev eth0 2>/dev/null | grep -q netem; then tc qdisc del dev eth0 root; fi"
    ]


def test_control_line_always_carries_the_rate() -> None:
    assert shell.control_line(-30) == "-30.000 x1\n"
    assert shell.control_line(0) == "+0.000 x1\n"
    assert shell.control_line(90.25) == "+90.250 x1\n"
    assert shell.parse_control_line("-30.000 x1\n") == -30.0
    with pytest.raises(ValueError, match="does not hold"):
        shell.parse_control_line("2024-01-01 00:00:00")


def test_clock_bump_writes_the_control_file_atomically_and_confirms_by_probe(
    remotes: dict[str, FakeRemote],
) -> None:
    remotes["n1"].files[FT.control_file] = b"-10.000 x1\n"
    outcome = shell.clock_bump(remotes, {"n1": 5.0, "n2": -30.0}, FT)
    assert outcome.error is None
    assert outcome.value["offsets"] == {"n1": -5.0, "n2": -30.0}
    assert outcome.value["probes"] == {
        "n1": pytest.approx(-5.0, abs=0.01),
        "n2": pytest.approx(-30.0, abs=0.01),
    }
    assert remotes["n1"].writes == [(FT.control_file, b"-5.000 x1\n", 0o644)]
    assert remotes["n2"].writes == [(FT.control_file, b"-30.000 x1\n", 0o644)]
    # The control file is only ever replaced through write_file, never rewritten in place by a command.
    assert not any(
        FT.control_file in cmd and ">" in cmd.split(FT.control_file)[0][-3:] for cmd in remotes["n1"].commands
    )
    probe = remotes["n1"].commands[-1].splitlines()
    assert probe == [
        "date +%s.%N",
        "env -u FAKETIME LD_PRELOAD=/opt/chaos/libfaketime.so.1 "
        "FAKETIME_TIMESTAMP_FILE=/var/lib/chaos/faketime/offset FAKETIME_NO_CACHE=1 "
        "FAKETIME_DONT_FAKE_MONOTONIC=1 date +%s.%N",
        "date +%s.%N",
    ]
    assert all(not remotes[n].writes for n in ("n3", "n4", "n5"))


def test_shell_clocks_bump_exactly_the_nodes_they_are_given(remotes: dict[str, FakeRemote]) -> None:
    outcome = ShellClocks(remotes, FT).bump({"n4": -42.0})
    assert outcome.error is None and outcome.value["offsets"] == {"n4": -42.0}
    assert remotes["n4"].writes == [(FT.control_file, b"-42.000 x1\n", 0o644)]
    assert all(not remotes[n].writes for n in ("n1", "n2", "n3", "n5"))


def test_a_clock_the_probe_does_not_confirm_is_not_recorded_as_applied(
    remotes: dict[str, FakeRemote],
) -> None:
    remotes["n1"].faketime_works = False
    outcome = shell.clock_bump(remotes, {"n1": -30.0, "n2": 12.0}, FT)
    assert outcome.value["offsets"] == {"n2": 12.0}
    assert outcome.error == "n1: clock offset not confirmed: set -30.000 s, probe saw +0.000 s"


def test_a_probe_without_usable_output_is_an_error(remotes: dict[str, FakeRemote]) -> None:
    remotes["n1"].respond("date", CommandResult(0, "Thu Jan  1\n", "date: invalid format\n"))
    probe = shell.probe_clock(remotes["n1"], FT)
    assert probe == "clock probe failed: date: invalid format"


def test_a_probe_whose_output_was_lost_is_asked_again(remotes: dict[str, FakeRemote]) -> None:
    answers = iter([CommandResult(0, "", ""), CommandResult(0, "100.0\n160.5\n100.2\n", "")])
    remotes["n1"].respond("date", lambda cmd: next(answers))
    assert shell.probe_clock(remotes["n1"], FT) == shell.ClockProbe(offset=pytest.approx(60.4),
                                                                      uncertainty=pytest.approx(0.1))
    remotes["n2"].respond("date", CommandResult(0, "", ""))
    assert shell.probe_clock(remotes["n2"], FT) == "clock probe failed: exit 0"
    assert sum("date +%s.%N" in c for c in remotes["n2"].commands) == shell.PROBE_ATTEMPTS


def test_probe_measures_the_offset_against_the_real_clock_on_the_node(remotes: dict[str, FakeRemote]) -> None:
    remotes["n1"].respond("date", CommandResult(0, "100.0\n160.5\n100.2\n", ""))
    probe = shell.probe_clock(remotes["n1"], FT)
    assert probe == shell.ClockProbe(offset=pytest.approx(60.4), uncertainty=pytest.approx(0.1))


def test_strobe_starts_a_detached_loop_and_accepts_either_offset(remotes: dict[str, FakeRemote]) -> None:
    remotes["n1"].respond("nohup", CommandResult(0, "777\n", ""))
    outcome = shell.clock_strobe(remotes, ["n1"], delta=2.5, period=0.2, duration=10.0, faketime=FT)
    assert outcome == Outcome(
        {"nodes": ["n1"], "base": {"n1": 0.0}, "delta": 2.5, "period": 0.2, "duration": 10.0}, None
    )
    start = next(cmd for cmd in remotes["n1"].commands if "nohup" in cmd)
    assert "'+2.500 x1'" in start and "'+0.000 x1'" in start
    assert "mv -f /var/lib/chaos/faketime/offset.strobe.tmp /var/lib/chaos/faketime/offset" in start
    assert "while [ $i -lt 25 ]" in start  # 10 s of 2 x 0.2 s flips
    assert f"echo $! > {FT.strobe_pid_file}" in start
    assert ">/dev/null 2>&1 </dev/null &" in start, "the loop must not hold the command's output open"


def test_clock_reset_stops_the_strobe_then_sets_zero(remotes: dict[str, FakeRemote]) -> None:
    remotes["n1"].files[FT.control_file] = b"+40.000 x1\n"
    outcome = shell.clock_reset(remotes, ["n1"], FT)
    assert outcome.error is None and outcome.value["nodes"] == ["n1"]
    assert remotes["n1"].commands[0] == shell._script(shell._stop_strobe_commands(FT))
    assert remotes["n1"].writes == [(FT.control_file, b"+0.000 x1\n", 0o644)]


def test_install_faketime_uploads_the_vendored_library_and_proves_it(remotes: dict[str, FakeRemote]) -> None:
    remote = remotes["n1"]
    outcome = shell.install_faketime(remote, FT)
    assert outcome.error is None, outcome.error
    assert remote.uploads == [(str(shell.vendored_libfaketime()), FT.library)]
    assert (FT.control_file, b"+0.000 x1\n", 0o644) in remote.writes
    assert (FT.probe_file, b"+1000.000 x1\n", 0o644) in remote.writes
    assert outcome.value["probe"] == pytest.approx(1000.0, abs=0.01)
    broken = remotes["n2"]
    broken.faketime_works = False
    assert shell.install_faketime(broken, FT).error.startswith("libfaketime does not work on this node")


def test_a_timed_out_command_is_an_error_with_unknown_effect(remotes: dict[str, FakeRemote]) -> None:
    def hang(cmd: str) -> CommandResult:
        raise RemoteTimeout("n1", "`iptables` was still running after 20 s and was killed")

    remotes["n1"].respond("iptables", hang)
    outcome = shell.heal(remotes)
    assert outcome.error is not None and outcome.error.startswith(
        "n1: iptables failed: timed out after 20 s, effect unknown"
    )
    assert outcome.value == {"nodes": ["n2", "n3", "n4", "n5"]}


def test_an_unreachable_node_raises_remote_error(remotes: dict[str, FakeRemote]) -> None:
    remotes["n4"].gone = True
    with pytest.raises(RemoteError, match="n4: cannot reach the node"):
        shell.partition(remotes, g.isolate(FIVE, "n4"), ADDRESSES)


def test_heal_all_restores_every_node_and_survives_one_that_is_gone(remotes: dict[str, FakeRemote]) -> None:
    remotes["n2"].gone = True
    remotes["n1"].respond("iptables", lambda cmd: CommandResult(0, "clock-control-present\n", ""))
    healed = shell.heal_all(remotes, pid_file=PID_FILE, faketime=FT)
    assert healed["n2"] == Outcome(None, "RemoteError: n2: cannot reach the node")
    assert healed["n1"] == Outcome(
        {"healed": ["partition", "loss", "latency", "resume", "strobe", "clock"]}, None
    )
    assert remotes["n1"].writes == [(FT.control_file, b"+0.000 x1\n", 0o644)]
    assert healed["n3"] == Outcome({"healed": ["partition", "loss", "latency", "resume", "strobe"]}, None)
    script = remotes["n3"].commands[0]
    for step in (
        "iptables -w -F CHAOS;",
        "iptables -w -F CHAOS-LOSS;",
        "tc qdisc del dev eth0 root",
        f'kill -s CONT "$(cat {PID_FILE})"',
        "; ".join(shell._stop_strobe_commands(FT)),
    ):
        assert step in script


def test_heal_all_reports_the_steps_that_failed(remotes: dict[str, FakeRemote]) -> None:
    remotes["n1"].respond("iptables", CommandResult(0, "", "failed: partition\nfailed: loss\n"))
    healed = shell.heal_all({"n1": remotes["n1"]})
    assert healed["n1"] == Outcome({"healed": ["latency"]}, "partition failed; loss failed")


def test_teardown_deletes_the_chains_and_checks_nothing_is_left(remotes: dict[str, FakeRemote]) -> None:
    result = shell.teardown(remotes, pid_file=PID_FILE, faketime=FT)
    assert all(outcome.applied for outcome in result.values())
    removal = remotes["n5"].commands[-1].splitlines()
    assert "while iptables -w -D INPUT -j CHAOS 2>/dev/null; do :; done" in removal
    assert "iptables -w -X CHAOS 2>/dev/null || true" in removal
    assert "iptables -w -X CHAOS-LOSS 2>/dev/null || true" in removal
    assert removal[-1].startswith("if iptables -w -S 2>/dev/null | grep -q CHAOS; then")
    remotes["n5"].respond("grep -q CHAOS", CommandResult(1, "", "CHAOS rules remain\n"))
    assert shell.teardown(remotes)["n5"].error == "iptables chains not removed: CHAOS rules remain"


def test_shell_net_and_clocks_apply_every_network_and_clock_fault(remotes: dict[str, FakeRemote]) -> None:
    net, clocks = ShellNet(remotes, ADDRESSES), ShellClocks(remotes, FT)
    for outcome in (
        net.heal(),
        net.loss(("n2",), 0.1),
        net.heal_loss(),
        net.latency(("n1",), 10.0, 2.0),
        net.heal_latency(),
        net.partition(g.bridge(FIVE), "bridge"),
        clocks.bump({"n1": 3.0}),
        clocks.reset(FIVE),
    ):
        assert outcome.applied, outcome
    assert outcome.value["nodes"] == list(FIVE)


# -- the clock faults for real, on this machine's shell ------------------------------------------------


def test_a_stopped_strobe_leaves_no_flip_in_flight_to_land_after_the_reset(tmp_path: Path) -> None:
    # The strobe's loop renames each flip over the control file with mv, a process of its own: killed
    # while one ran, the loop died and that mv landed after the reset's write, leaving the strobed
    # offset behind (a CI run on a loaded machine saw it). Here the flip in flight is made slow on
    # purpose; stopping the strobe must leave it nothing to rename.
    import time

    faketime = FakeTime(library="unused", control_file=str(tmp_path / "offset"))
    local = LocalRemote()
    temp, control = faketime.strobe_temp_file, faketime.control_file
    loop = (f"while :; do printf '%s\\n' '-12.500 x1' > {temp} && "
            f"{{ sleep 0.4; mv -f {temp} {control} 2>/dev/null; }} & sleep 0.1; done")
    started = local.run(f"setsid sh -c \"{loop}\" >/dev/null 2>&1 </dev/null & echo $! > {faketime.strobe_pid_file}")
    assert started.ok, started
    time.sleep(0.25)  # flips are in flight
    stopped = local.run(shell._script(shell._stop_strobe_commands(faketime)), check=False)
    assert stopped.ok, stopped
    assert shell._write_control(local, faketime, 0.0) is None
    time.sleep(0.6)  # every mv started before the stop has had its time
    assert Path(control).read_text() == "+0.000 x1\n"
    assert not Path(faketime.strobe_pid_file).exists()


@pytest.mark.slow
def test_clock_faults_for_real_with_the_vendored_libfaketime(tmp_path: Path) -> None:
    faketime = FakeTime(
        library=str(tmp_path / "lib" / "libfaketime.so.1"), control_file=str(tmp_path / "ft" / "offset")
    )
    local = LocalRemote()
    nodes = {"local": local}
    installed = shell.install_faketime(local, faketime)
    assert installed.error is None, installed.error
    bumped = shell.clock_bump(nodes, {"local": -42.5}, faketime)
    assert bumped.error is None, bumped.error
    assert bumped.value["probes"]["local"] == pytest.approx(-42.5, abs=0.5)
    assert Path(faketime.control_file).read_text() == "-42.500 x1\n"
    strobed = shell.clock_strobe(nodes, ["local"], delta=30.0, period=0.1, duration=30.0, faketime=faketime)
    try:
        assert strobed.error is None, strobed.error
        assert Path(faketime.strobe_pid_file).read_text().strip().isdigit()
    finally:
        reset = shell.clock_reset(nodes, ["local"], faketime)
    assert reset.error is None, reset.error
    assert not Path(faketime.strobe_pid_file).exists()
    assert shell.probe_clock(local, faketime).offset == pytest.approx(0.0, abs=0.5)


def test_missing_addresses_and_remotes_are_named_not_guessed(remotes: dict[str, FakeRemote]) -> None:
    partial = {n: a for n, a in ADDRESSES.items() if n != "n5"}
    outcome = shell.partition(remotes, g.isolate(FIVE, "n5"), partial)
    assert outcome == Outcome({"kind": "grudge", "grudge": {}}, "no address known for node(s) n5")
    assert shell.loss(remotes, ["n1"], 0.1, partial).error == (
        "no address known for node(s) n5; pass every node's address"
    )
    assert all(not r.commands for r in remotes.values())
