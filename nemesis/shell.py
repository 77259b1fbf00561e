"""Fault implementations as shell commands over a ``Remote``: they work against any system under test.

* **Partitions** are ``iptables`` rules on each node's INPUT for the source addresses its grudge names,
  kept in a dedicated chain (:data:`PARTITION_CHAIN`) hooked into INPUT, so healing is one ``iptables -F``
  and teardown removes the chain. One-way partitions are asymmetric grudges, and they are one-way for
  TCP too (:func:`partition_commands`): a node that does not receive from A drops, by conntrack
  direction, what A sends on the connections A opened, but lets through A's acknowledgements on the
  connections this node opened, so its own messages still reach A. A plain DROP of everything from A
  would cut both directions, since TCP needs the acknowledgements.
* **Packet loss** is a second chain (:data:`LOSS_CHAIN`) of ``-m statistic --mode random --probability P``
  DROP rules for the other nodes' addresses; it heals independently of partitions.
* **Latency** is ``tc qdisc ... netem``. Where the kernel has no netem ("Specified qdisc kind is
  unknown", as on the machines of ENVIRONMENT.md) the outcome says it is unavailable on this host; it is
  never faked with something else.
* **Kill / pause / resume** are not here: they act on the system's own process, which only its DB
  adapter knows how to find (``harness.fault_driver.AdapterProcesses``).
* **Clock skew** follows ENVIRONMENT.md's libfaketime recipe exactly: the node process runs with
  :meth:`FakeTime.environment` (``LD_PRELOAD`` of the ``.so`` from the PyPI package ``libfaketime``,
  ``FAKETIME_TIMESTAMP_FILE``, ``FAKETIME_NO_CACHE=1``, ``FAKETIME_DONT_FAKE_MONOTONIC=1``, never
  ``FAKETIME``); the control file holds one line such as ``-30.000 x1`` (the rate always explicit) and is
  replaced atomically with ``Remote.write_file``. A probe then runs ``date`` on the node under the same
  preload and compares it with the real clock; only a confirmed offset counts as applied.

Contract of every fault function: it returns an :class:`Outcome`, whose ``value`` is what was actually
applied (the history's nemesis completion value, FORMATS.md) and whose ``error`` says what could not be
applied, node by node. It never raises because a fault could not be applied; it raises ``RemoteError``
only when a node cannot be reached at all. A command that times out is an error outcome ("effect
unknown"). :func:`heal_all` and :func:`teardown` never raise: they are the guaranteed cleanup.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from nemesis import grudge as grudges
from nemesis.faults import (
    Outcome,
)
from nemesis.remote import CommandResult, Remote, RemoteError, RemoteTimeout

PARTITION_CHAIN = "CHAOS"
LOSS_CHAIN = "CHAOS-LOSS"
CHAINS = (PARTITION_CHAIN, LOSS_CHAIN)
DEFAULT_DEVICE = "eth0"
COMMAND_TIMEOUT = 20.0
"""Seconds any one fault command may take on a node before its effect is declared unknown."""
CLOCK_TOLERANCE = 0.5
"""How far (seconds, beyond the probe's own uncertainty) a probed offset may be from the one set."""
NETEM_UNKNOWN = ("Specified qdisc kind is unknown", "Unknown qdisc", "qdisc kind is unknown")
"""What ``tc`` says when the kernel has no netem (sch_netem)."""
LIBFAKETIME_IN_PACKAGE = ("vendor", "libfaketime", "src", "libfaketime.so.1")


@dataclass(frozen=True)
class FakeTime:
    """Where libfaketime lives on a node and which file controls the node process's wall clock.

    The control file's directory must be writable: ``write_file`` renames a temporary file over it.
    """

    library: str = "/opt/chaos/libfaketime.so.1"
    control_file: str = "/var/lib/chaos/faketime/offset"

    @property
    def directory(self) -> str:
        return str(PurePosixPath(self.control_file).parent)

    @property
    def strobe_pid_file(self) -> str:
        return self.control_file + ".strobe.pid"

    @property
    def strobe_temp_file(self) -> str:
        """Where the strobe writes each flip before renaming it over the control file."""
        return self.control_file + ".strobe.tmp"

    @property
    def probe_file(self) -> str:
        return self.control_file + ".probe"

    def environment(self, control_file: str | None = None) -> dict[str, str]:
        """The environment a node process (or a probe) runs with so that only its wall clock is skewed.

        ``FAKETIME`` must stay unset: it would override the control file (ENVIRONMENT.md).
        """
        return {
            "LD_PRELOAD": self.library,
            "FAKETIME_TIMESTAMP_FILE": control_file or self.control_file,
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }


@dataclass(frozen=True)
class ClockProbe:
    """One probe of a node's skewed clock: the offset seen, and the probe's own uncertainty (seconds)."""

    offset: float
    uncertainty: float


T = TypeVar("T")


def _on_nodes(nodes: Sequence[str], action: Callable[[str], T]) -> dict[str, T]:
    """Run ``action`` for every node concurrently; results in node order. Re-raises the first error."""
    if len(nodes) <= 1:
        return {node: action(node) for node in nodes}
    with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="nemesis") as pool:
        futures = {node: pool.submit(action, node) for node in nodes}
        return {node: futures[node].result() for node in nodes}


def _script(lines: Iterable[str]) -> str:
    return "\n".join(lines)


def _run(remote: Remote, script: str, timeout: float = COMMAND_TIMEOUT) -> CommandResult:
    """Run a shell script on the node without raising for its exit code; a timeout is exit 124."""
    try:
        return remote.run(script, timeout=timeout, check=False)
    except RemoteTimeout as exc:
        return CommandResult(124, "", f"timed out after {timeout:g} s, effect unknown ({exc})")


def _why(result: CommandResult) -> str:
    """The last meaningful line a failed command printed, on stderr first."""
    for stream in (result.stderr, result.stdout):
        lines = [line.strip() for line in stream.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return f"exit {result.exit_code}"


def _join_errors(errors: Mapping[str, str]) -> str | None:
    if not errors:
        return None
    return "; ".join(f"{node}: {error}" for node, error in errors.items())


def _known(remotes: Mapping[str, Remote], nodes: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """Split ``nodes`` into those with a remote and an error for each that has none."""
    present, errors = [], {}
    for node in nodes:
        if node in remotes:
            present.append(node)
        else:
            errors[node] = "no remote for this node"
    return present, errors


# -- iptables ---------------------------------------------------------------------------------------


def _ensure_chain(chain: str) -> list[str]:
    """Lines that create ``chain`` and hook it first into INPUT, both only if missing."""
    return [
        f"iptables -w -N {chain} 2>/dev/null || true",
        f"iptables -w -C INPUT -j {chain} 2>/dev/null || iptables -w -I INPUT 1 -j {chain}",
    ]


def partition_commands(dropped: Iterable[str], reply_ports: Iterable[int] = ()) -> list[str]:
    """The script that makes a node stop receiving from exactly these source addresses.

    For each address A, in order: (1) replies from A's request/response services (``reply_ports``, e.g.
    a store the node calls) are dropped, whichever side opened the connection; (2) every packet from A
    that conntrack counts in the ORIGINAL direction, i.e. belongs to a flow A opened, is dropped: A's
    messages to this node's servers (established connections included, from the rule's first packet on,
    since the match is on direction, not on NEW), A's new connections, UDP and ICMP A starts. What A
    sends in the REPLY direction of connections this node opened passes: A's acknowledgements, so what
    this node sends A still arrives. So, for a system whose nodes send each message on a connection the
    sender opened (as ``cluster``'s peer links do), "B does not receive from A" loses exactly the messages
    A sends B, as the simulator does per message. Needs the ``conntrack`` match (xt_conntrack) on the node.
    """
    replies = ",".join(str(int(p)) for p in sorted(set(reply_ports)))
    lines = ["set -e", *_ensure_chain(PARTITION_CHAIN), f"iptables -w -F {PARTITION_CHAIN}"]
    for a in dropped:
        source = f"iptables -w -A {PARTITION_CHAIN} -s {shlex.quote(a)}"
        if replies:
            lines.append(f"{source} -p tcp -m multiport --sports {replies} -j DROP")
        lines.append(f"{source} -m conntrack --ctdir ORIGINAL -j DROP")
    return lines


def loss_commands(peers: Iterable[str], probability: float) -> list[str]:
    """The script that makes a node drop packets from these addresses with ``probability``."""
    lines = ["set -e", *_ensure_chain(LOSS_CHAIN), f"iptables -w -F {LOSS_CHAIN}"]
    lines += [
        f"iptables -w -A {LOSS_CHAIN} -s {shlex.quote(a)} -m statistic --mode random "
        f"--probability {probability:g} -j DROP"
        for a in peers
    ]
    return lines


def _flush_commands(chain: str) -> list[str]:
    """Empty a chain if it exists (a node never partitioned has nothing to heal)."""
    return [f"if iptables -w -n -L {chain} >/dev/null 2>&1; then iptables -w -F {chain}; fi"]


def _addresses_of(nodes: Iterable[str], addresses: Mapping[str, str]) -> list[str]:
    missing = sorted(n for n in nodes if n not in addresses)
    if missing:
        raise ValueError(f"no address known for node(s) {', '.join(missing)}; pass every node's address")
    return [addresses[n] for n in nodes]


def partition(
    remotes: Mapping[str, Remote],
    grudge: Mapping[str, Iterable[str]],
    addresses: Mapping[str, str],
    kind: str = "grudge",
    reply_ports: Iterable[int] = (),
) -> Outcome:
    """Make every node drop exactly what the grudge says (replacing any earlier partition).

    Nodes the grudge does not name drop nothing. ``reply_ports``: ports of request/response services on
    the nodes, whose replies a cut-off node must not receive either (:func:`partition_commands`).
    ``value``: ``{"kind", "grudge"}`` with the grudge as applied, i.e. without the nodes whose rules
    could not be installed (named in ``error``).
    """
    reply_ports = tuple(reply_ports)
    nodes = list(remotes)
    normal = grudges.validate({n: frozenset(d) for n, d in grudge.items()}, nodes)
    missing = sorted({n for d in normal.values() for n in d} - set(addresses))
    if missing:
        return Outcome({"kind": kind, "grudge": {}}, f"no address known for node(s) {', '.join(missing)}")

    def apply(node: str) -> str | None:
        dropped = sorted(normal.get(node, ()))
        result = _run(remotes[node], _script(partition_commands((addresses[n] for n in dropped), reply_ports)))
        return None if result.ok else f"iptables failed: {_why(result)}"

    results = _on_nodes(nodes, apply)
    errors = {node: error for node, error in results.items() if error}
    applied = {node: normal.get(node, frozenset()) for node in nodes if node not in errors}
    return Outcome({"kind": kind, "grudge": grudges.to_json(applied)}, _join_errors(errors))


def heal(remotes: Mapping[str, Remote]) -> Outcome:
    """Flush the partition chain on every node. ``value``: ``{"nodes": [healed nodes]}``."""
    return _flush(remotes, PARTITION_CHAIN)


def heal_loss(remotes: Mapping[str, Remote]) -> Outcome:
    """Flush the packet-loss chain on every node."""
    return _flush(remotes, LOSS_CHAIN)


def _flush(remotes: Mapping[str, Remote], chain: str) -> Outcome:
    results = _on_nodes(list(remotes), lambda node: _run(remotes[node], _script(_flush_commands(chain))))
    errors = {node: f"iptables failed: {_why(r)}" for node, r in results.items() if not r.ok}
    return Outcome({"nodes": [n for n in results if n not in errors]}, _join_errors(errors))


def loss(
    remotes: Mapping[str, Remote], targets: Sequence[str], probability: float, addresses: Mapping[str, str]
) -> Outcome:
    """Each target drops packets from every other node with ``probability`` (replacing earlier loss).

    Only traffic between nodes is affected; the controller's clients and status polls are not.
    ``value``: ``{"nodes": [...], "probability": p}``.
    """
    if not 0 < probability <= 1:
        return Outcome(
            {"nodes": [], "probability": probability}, f"loss probability {probability} is not in (0, 1]"
        )
    nodes, errors = _known(remotes, targets)
    try:
        _addresses_of(remotes, addresses)
    except ValueError as exc:
        return Outcome({"nodes": [], "probability": probability}, str(exc))

    def apply(node: str) -> str | None:
        peers = [addresses[n] for n in remotes if n != node]
        result = _run(remotes[node], _script(loss_commands(peers, probability)))
        return None if result.ok else f"iptables failed: {_why(result)}"

    for node, error in _on_nodes(nodes, apply).items():
        if error:
            errors[node] = error
    return Outcome(
        {"nodes": [n for n in nodes if n not in errors], "probability": probability}, _join_errors(errors)
    )


# -- netem ------------------------------------------------------------------------------------------


def latency_commands(delay_ms: float, jitter_ms: float, device: str = DEFAULT_DEVICE) -> list[str]:
    jitter = f" {jitter_ms:g}ms" if jitter_ms > 0 else ""
    return [f"tc qdisc replace dev {shlex.quote(device)} root netem delay {delay_ms:g}ms{jitter}"]


def _netem_missing(result: CommandResult) -> str | None:
    """Why netem is unavailable, if the failed ``tc`` says so (no netem in the kernel, no ``tc``)."""
    text = result.stderr + result.stdout
    for marker in NETEM_UNKNOWN:
        if marker in text:
            return f"the kernel has no netem qdisc (tc: {marker})"
    if result.exit_code == 127:
        return "tc (iproute2) is not installed on the node"
    return None


def latency(
    remotes: Mapping[str, Remote],
    targets: Sequence[str],
    delay_ms: float,
    jitter_ms: float = 0.0,
    device: str = DEFAULT_DEVICE,
) -> Outcome:
    """Delay every packet the targets send by ``delay_ms`` ± ``jitter_ms`` with netem.

    ``value``: ``{"nodes", "delay_ms", "jitter_ms"}``, plus ``"unavailable": true`` when the host cannot
    do it; the ``error`` then reads "latency unavailable on this host: ...".
    """
    nodes, errors = _known(remotes, targets)
    unavailable: dict[str, str] = {}

    def apply(node: str) -> CommandResult:
        return _run(remotes[node], _script(latency_commands(delay_ms, jitter_ms, device)))

    for node, result in _on_nodes(nodes, apply).items():
        if result.ok:
            continue
        missing = _netem_missing(result)
        if missing:
            unavailable[node] = missing
        else:
            errors[node] = f"tc failed: {_why(result)}"
    value: dict[str, Any] = {
        "nodes": [n for n in nodes if n not in errors and n not in unavailable],
        "delay_ms": delay_ms,
        "jitter_ms": jitter_ms,
    }
    if unavailable:
        value["unavailable"] = True
        reasons = sorted(set(unavailable.values()))
        errors = {
            **errors,
            ",".join(unavailable): "latency unavailable on this host: " + "; ".join(reasons),
        }
    return Outcome(value, _join_errors(errors))


def heal_latency(remotes: Mapping[str, Remote], device: str = DEFAULT_DEVICE) -> Outcome:
    """Remove a netem root qdisc where one is installed; nodes without one have nothing to heal."""
    dev = shlex.quote(device)
    script = f"if tc qdisc show dev {dev} 2>/dev/null | grep -q netem; then tc qdisc del dev {dev} root; fi"
    results = _on_nodes(list(remotes), lambda node: _run(remotes[node], script))
    errors = {node: f"tc failed: {_why(r)}" for node, r in results.items() if not r.ok}
    return Outcome({"nodes": [n for n in results if n not in errors]}, _join_errors(errors))


def netem_available(remote: Remote, device: str = DEFAULT_DEVICE) -> str | None:
    """``None`` if netem works on this node, else why not (adds and removes a zero delay on ``device``)."""
    dev = shlex.quote(device)
    result = _run(remote, f"tc qdisc replace dev {dev} root netem delay 0ms && tc qdisc del dev {dev} root")
    if result.ok:
        return None
    return _netem_missing(result) or f"tc failed: {_why(result)}"


# -- libfaketime ------------------------------------------------------------------------------------

_OFFSET_LINE = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)\s+x1\s*$")


def control_line(offset: float) -> str:
    """The control file's content for ``offset`` seconds: ``-30.000 x1``. The rate is always explicit:
    a rate once written sticks (ENVIRONMENT.md)."""
    return f"{offset:+.3f} x1\n"


def parse_control_line(text: str) -> float:
    """The offset in a control file written by :func:`control_line`; raises ``ValueError`` otherwise."""
    match = _OFFSET_LINE.match(text.strip())
    if not match:
        raise ValueError(f"control file does not hold '<seconds> x1': {text.strip()!r}")
    return float(match.group(1))


def vendored_libfaketime() -> Path:
    """The ``libfaketime.so.1`` shipped in the PyPI package ``libfaketime`` (ENVIRONMENT.md: Debian's
    0.9.10 breaks ``time.sleep`` on Python 3.11). Raises ``FileNotFoundError`` saying how to install it."""
    spec = importlib.util.find_spec("libfaketime")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the PyPI package libfaketime is not installed: run `pip install libfaketime`"
        )
    path = Path(spec.origin).parent.joinpath(*LIBFAKETIME_IN_PACKAGE)
    if not path.is_file():
        raise FileNotFoundError(
            f"the libfaketime package has no {'/'.join(LIBFAKETIME_IN_PACKAGE)} at {path}"
        )
    return path


PROBE_ATTEMPTS = 3
"""How often a clock probe whose output came back empty is asked again (:func:`probe_clock`)."""


def probe_commands(faketime: FakeTime, control_file: str | None = None) -> list[str]:
    """Real clock, skewed clock, real clock: three ``date`` lines, read on the node itself."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in faketime.environment(control_file).items())
    return ["date +%s.%N", f"env -u FAKETIME {env} date +%s.%N", "date +%s.%N"]


def probe_clock(remote: Remote, faketime: FakeTime, control_file: str | None = None) -> ClockProbe | str:
    """The wall-clock offset a process preloaded with libfaketime sees on this node, or why it failed."""
    for _ in range(PROBE_ATTEMPTS):
        result = _run(remote, _script(probe_commands(faketime, control_file)))
        # Exit 0 with no output at all: the command ran, its output was lost on the way back (seen under
        # load on Docker, at 5 container runs at once: "clock probe failed: exit 0" on two of five nodes).
        # The probe changes nothing, so it is asked again; anything else is the answer.
        if result.exit_code != 0 or result.stdout.strip() or result.stderr.strip():
            break
    try:
        before, skewed, after = (float(line) for line in result.stdout.split())
    except ValueError:
        return f"clock probe failed: {_why(result)}"
    return ClockProbe(offset=skewed - (before + after) / 2, uncertainty=(after - before) / 2)


def _confirm(probe: ClockProbe | str, expected: Iterable[float], tolerance: float) -> str | None:
    """``None`` if the probe saw one of the expected offsets, else why not."""
    if isinstance(probe, str):
        return probe
    wanted = list(expected)
    if any(abs(probe.offset - e) <= tolerance + probe.uncertainty for e in wanted):
        return None
    shown = " or ".join(f"{e:+.3f}" for e in wanted)
    return f"clock offset not confirmed: set {shown} s, probe saw {probe.offset:+.3f} s"


def _write_control(remote: Remote, faketime: FakeTime, offset: float, path: str | None = None) -> str | None:
    """Atomically replace the control file (Remote.write_file renames a temp file over it)."""
    try:
        remote.write_file(path or faketime.control_file, control_line(offset).encode(), 0o644)
    except RemoteTimeout as exc:
        return f"writing the clock control file timed out, effect unknown: {exc}"
    except RemoteError as exc:
        return f"could not write the clock control file: {exc}"
    return None


def install_faketime(remote: Remote, faketime: FakeTime, library: Path | None = None) -> Outcome:
    """Put libfaketime on the node, create a zero control file, and prove that the preload works there.

    The proof sets +1000 s in a separate probe file and expects a probe to see it, so the real control
    file is never disturbed. ``value``: ``{"library", "control_file", "probe"}``.
    """
    try:
        local = library or vendored_libfaketime()
    except FileNotFoundError as exc:
        return Outcome(None, str(exc))
    made = _run(
        remote,
        f"mkdir -p {shlex.quote(faketime.directory)} {shlex.quote(str(PurePosixPath(faketime.library).parent))}",
    )
    if not made.ok:
        return Outcome(None, f"could not create the libfaketime directories: {_why(made)}")
    try:
        remote.upload(local, faketime.library)
    except RemoteError as exc:
        return Outcome(None, f"could not upload libfaketime: {exc}")
    for path, offset in ((faketime.control_file, 0.0), (faketime.probe_file, 1000.0)):
        error = _write_control(remote, faketime, offset, path)
        if error:
            return Outcome(None, error)
    probe = probe_clock(remote, faketime, faketime.probe_file)
    _run(remote, f"rm -f {shlex.quote(faketime.probe_file)}")
    error = _confirm(probe, [1000.0], CLOCK_TOLERANCE)
    value = {"library": faketime.library, "control_file": faketime.control_file}
    if isinstance(probe, ClockProbe):
        value["probe"] = round(probe.offset, 3)
    return Outcome(value, None if error is None else f"libfaketime does not work on this node: {error}")


def clock_offset(remote: Remote, faketime: FakeTime) -> float | str:
    """The offset the control file holds now (0 when there is none yet), or why it cannot be read."""
    f = shlex.quote(faketime.control_file)
    result = _run(remote, f"if [ -e {f} ]; then cat {f}; else echo '+0 x1'; fi")
    if not result.ok:
        return f"could not read the clock control file: {_why(result)}"
    try:
        return parse_control_line(result.stdout)
    except ValueError as exc:
        return str(exc)


STROBE_STOP_POLLS = 100
"""How many times (50 ms apart) stopping a strobe looks whether its loop has gone: at most 5 s."""


def _stop_strobe_commands(faketime: FakeTime) -> list[str]:
    """Stop a strobe so that nothing it started can write the control file afterwards: signal its loop,
    wait until the loop is gone (or a zombie), then remove its temporary file. A flip's ``mv`` that was
    under way when the loop died then either renamed it already (the write that follows wins) or finds
    nothing to rename; without the wait and the removal such a ``mv`` could land after the reset and
    leave the strobed offset behind (it did, on a loaded machine). One line of ``;``-joined commands:
    ``heal_commands`` runs it as one step."""
    p, temp = shlex.quote(faketime.strobe_pid_file), shlex.quote(faketime.strobe_temp_file)
    gone = '{ [ -z "$state" ] || [ "$state" = Z ]; }'
    wait = (f"n=0; while [ $n -lt {STROBE_STOP_POLLS} ]; do "
            'state="$(cut -d" " -f3 "/proc/$pid/stat" 2>/dev/null)"; '
            f"{gone} && break; sleep 0.05; n=$((n+1)); done")
    return [f'if [ -s {p} ]; then pid="$(cat {p})"; kill "$pid" 2>/dev/null || true; {wait}; fi',
            f"rm -f {temp} {p}"]


def set_clock(
    remote: Remote, faketime: FakeTime, offset: float, tolerance: float = CLOCK_TOLERANCE
) -> tuple[float | None, str | None]:
    """Set one node's offset and probe it: (probed offset, error). The error is None only if confirmed."""
    error = _write_control(remote, faketime, offset)
    if error:
        return None, error
    probe = probe_clock(remote, faketime)
    seen = round(probe.offset, 3) if isinstance(probe, ClockProbe) else None
    return seen, _confirm(probe, [offset], tolerance)


def clock_bump(
    remotes: Mapping[str, Remote],
    deltas: Mapping[str, float],
    faketime: FakeTime,
    tolerance: float = CLOCK_TOLERANCE,
) -> Outcome:
    """Add ``deltas[node]`` seconds to each node's current offset, confirmed by a probe.

    ``value``: ``{"offsets": {node: offset set}, "probes": {node: offset seen}}`` for confirmed nodes.
    """
    nodes, errors = _known(remotes, deltas)

    def apply(node: str) -> tuple[float | None, float | None, str | None]:
        current = clock_offset(remotes[node], faketime)
        if isinstance(current, str):
            return None, None, current
        target = round(current + deltas[node], 3)
        seen, error = set_clock(remotes[node], faketime, target, tolerance)
        return target, seen, error

    offsets: dict[str, float] = {}
    probes: dict[str, float] = {}
    for node, (target, seen, error) in _on_nodes(nodes, apply).items():
        if error:
            errors[node] = error
        elif target is not None and seen is not None:
            offsets[node], probes[node] = target, seen
    return Outcome({"offsets": offsets, "probes": probes}, _join_errors(errors))


def strobe_commands(
    faketime: FakeTime, base: float, delta: float, period: float, duration: float
) -> list[str]:
    """Start a background loop on the node that flips the control file between ``base + delta`` and
    ``base`` every ``period`` seconds for ``duration`` seconds, ending at ``base``.

    Each flip writes a temporary file and renames it over the control file (atomic, as write_file is);
    the loop's pid goes to the strobe pid file so :func:`clock_reset` and :func:`heal_all` can stop it.
    """
    control = faketime.control_file
    temp = faketime.strobe_temp_file
    flips = max(1, int(duration / (2 * period)))
    write = "printf '%s\\n' {line} > {temp} && mv -f {temp} {control}"
    inner = _script(
        [
            "i=0",
            f"while [ $i -lt {flips} ]; do",
            "  "
            + write.format(
                line=shlex.quote(control_line(base + delta).strip()),
                temp=shlex.quote(temp),
                control=shlex.quote(control),
            ),
            f"  sleep {period:g}",
            "  "
            + write.format(
                line=shlex.quote(control_line(base).strip()),
                temp=shlex.quote(temp),
                control=shlex.quote(control),
            ),
            f"  sleep {period:g}",
            "  i=$((i+1))",
            "done",
            f"rm -f {shlex.quote(faketime.strobe_pid_file)}",
        ]
    )
    p = shlex.quote(faketime.strobe_pid_file)
    return [
        *_stop_strobe_commands(faketime),
        "if command -v setsid >/dev/null 2>&1; then detach=setsid; else detach=; fi",
        f"$detach nohup sh -c {shlex.quote(inner)} >/dev/null 2>&1 </dev/null &",
        f"echo $! > {p}",
        "echo $!",
    ]


def clock_strobe(
    remotes: Mapping[str, Remote],
    targets: Sequence[str],
    delta: float,
    period: float,
    duration: float,
    faketime: FakeTime,
    tolerance: float = CLOCK_TOLERANCE,
) -> Outcome:
    """Strobe each target's clock (see :func:`strobe_commands`), confirmed by a probe that sees either of
    the two offsets. ``value``: ``{"nodes", "base": {node: offset}, "delta", "period", "duration"}``."""
    nodes, errors = _known(remotes, targets)

    def apply(node: str) -> tuple[float | None, str | None]:
        remote = remotes[node]
        base = clock_offset(remote, faketime)
        if isinstance(base, str):
            return None, base
        started = _run(remote, _script(strobe_commands(faketime, base, delta, period, duration)))
        if not started.ok:
            return None, f"could not start the clock strobe: {_why(started)}"
        return base, _confirm(probe_clock(remote, faketime), [base, base + delta], tolerance)

    bases: dict[str, float] = {}
    for node, (base, error) in _on_nodes(nodes, apply).items():
        if error:
            errors[node] = error
        elif base is not None:
            bases[node] = base
    value = {"nodes": list(bases), "base": bases, "delta": delta, "period": period, "duration": duration}
    return Outcome(value, _join_errors(errors))


def clock_reset(
    remotes: Mapping[str, Remote],
    targets: Sequence[str],
    faketime: FakeTime,
    tolerance: float = CLOCK_TOLERANCE,
) -> Outcome:
    """Stop any strobe and set each target's offset back to 0, confirmed by a probe."""
    nodes, errors = _known(remotes, targets)

    def apply(node: str) -> tuple[float | None, str | None]:
        stopped = _run(remotes[node], _script(_stop_strobe_commands(faketime)))
        if not stopped.ok:
            return None, f"could not stop the clock strobe: {_why(stopped)}"
        return set_clock(remotes[node], faketime, 0.0, tolerance)

    probes: dict[str, float] = {}
    for node, (seen, error) in _on_nodes(nodes, apply).items():
        if error:
            errors[node] = error
        elif seen is not None:
            probes[node] = seen
    return Outcome({"nodes": list(probes), "probes": probes}, _join_errors(errors))


# -- cleanup ----------------------------------------------------------------------------------------


HEAL_STEPS = ("partition", "loss", "latency", "resume", "strobe")


def heal_commands(pid_file: str | None, faketime: FakeTime | None, device: str = DEFAULT_DEVICE) -> list[str]:
    """Everything a node needs to be whole again. Each step runs whatever the others did, and a step that
    fails prints ``failed: <step>`` on stderr; the script prints ``clock-control-present`` when the node
    has a clock control file to reset."""
    dev = shlex.quote(device)
    steps = [
        ("partition", _flush_commands(PARTITION_CHAIN)[0]),
        ("loss", _flush_commands(LOSS_CHAIN)[0]),
        (
            "latency",
            f"if tc qdisc show dev {dev} 2>/dev/null | grep -q netem; then tc qdisc del dev {dev} root; fi",
        ),
    ]
    if pid_file:
        f = shlex.quote(pid_file)
        steps.append(("resume", f'if [ -s {f} ]; then kill -s CONT "$(cat {f})" 2>/dev/null || true; fi'))
    if faketime:
        steps.append(("strobe", "{ " + "; ".join(_stop_strobe_commands(faketime)) + "; }"))
    lines = [f"{command} || echo 'failed: {step}' >&2" for step, command in steps]
    if faketime:
        lines.append(f"if [ -e {shlex.quote(faketime.control_file)} ]; then echo clock-control-present; fi")
    return lines


def heal_all(
    remotes: Mapping[str, Remote],
    *,
    pid_file: str | None = None,
    faketime: FakeTime | None = None,
    device: str = DEFAULT_DEVICE,
) -> dict[str, Outcome]:
    """Restore every node: flush both chains, remove netem, SIGCONT the process, stop strobes and set the
    clock back to 0. Never raises: a node that cannot be reached gets an error outcome and the others
    are still healed. Returns the outcome per node, ``value`` ``{"healed": [steps done]}``."""

    def restore(node: str) -> Outcome:
        remote = remotes[node]
        try:
            result = _run(remote, _script(heal_commands(pid_file, faketime, device)))
            failed = [
                line.split(":", 1)[1].strip()
                for line in result.stderr.splitlines()
                if line.startswith("failed:")
            ]
            ran = [s for s in HEAL_STEPS if (s != "resume" or pid_file) and (s != "strobe" or faketime)]
            done = [s for s in ran if s not in failed]
            errors = [f"{step} failed" for step in failed]
            if result.exit_code == 124:
                errors.append(_why(result))
            if faketime and "clock-control-present" in result.stdout:
                error = _write_control(remote, faketime, 0.0)
                if error:
                    errors.append(error)
                else:
                    done.append("clock")
            return Outcome({"healed": done}, "; ".join(errors) or None)
        except Exception as exc:  # noqa: BLE001 - cleanup must go on for the other nodes whatever happens
            return Outcome(None, f"{type(exc).__name__}: {exc}")

    return _on_nodes(list(remotes), restore)


def remove_chains_commands() -> list[str]:
    lines = []
    for chain in CHAINS:
        lines += [
            f"while iptables -w -D INPUT -j {chain} 2>/dev/null; do :; done",
            f"iptables -w -F {chain} 2>/dev/null || true",
            f"iptables -w -X {chain} 2>/dev/null || true",
        ]
    lines.append(
        "if iptables -w -S 2>/dev/null | grep -q CHAOS; then echo 'CHAOS rules remain' >&2; exit 1; fi"
    )
    return lines


def teardown(
    remotes: Mapping[str, Remote],
    *,
    pid_file: str | None = None,
    faketime: FakeTime | None = None,
    device: str = DEFAULT_DEVICE,
) -> dict[str, Outcome]:
    """:func:`heal_all`, then delete the nemesis chains so no rule outlives the run. Never raises."""
    healed = heal_all(remotes, pid_file=pid_file, faketime=faketime, device=device)

    def remove(node: str) -> Outcome:
        try:
            result = _run(remotes[node], _script(remove_chains_commands()))
        except Exception as exc:  # noqa: BLE001 - cleanup must go on for the other nodes whatever happens
            return Outcome(
                healed[node].value,
                "; ".join(filter(None, [healed[node].error, f"{type(exc).__name__}: {exc}"])),
            )
        error = None if result.ok else f"iptables chains not removed: {_why(result)}"
        return Outcome(healed[node].value, "; ".join(filter(None, [healed[node].error, error])) or None)

    return _on_nodes(list(remotes), remove)


# -- dispatch ---------------------------------------------------------------------------------------


class ShellNet:
    """``nemesis.driver.Net`` over the nodes' shells: iptables chains and netem (module docstring).

    ``addresses``: where each node's peers reach it (the source addresses a grudge drops);
    ``reply_ports``: ports of request/response services on the nodes (:func:`partition_commands`).
    """

    def __init__(
        self,
        remotes: Mapping[str, Remote],
        addresses: Mapping[str, str],
        *,
        device: str = DEFAULT_DEVICE,
        reply_ports: Iterable[int] = (),
    ) -> None:
        self.remotes = dict(remotes)
        self.addresses = dict(addresses)
        self.device = device
        self.reply_ports = tuple(reply_ports)

    def partition(self, grudge: grudges.Grudge, kind: str) -> Outcome:
        return partition(self.remotes, grudge, self.addresses, kind, self.reply_ports)

    def heal(self) -> Outcome:
        return heal(self.remotes)

    def loss(self, targets: Sequence[str], probability: float) -> Outcome:
        return loss(self.remotes, targets, probability, self.addresses)

    def heal_loss(self) -> Outcome:
        return heal_loss(self.remotes)

    def latency(self, targets: Sequence[str], delay_ms: float, jitter_ms: float) -> Outcome:
        return latency(self.remotes, targets, delay_ms, jitter_ms, self.device)

    def heal_latency(self) -> Outcome:
        return heal_latency(self.remotes, self.device)


class ShellClocks:
    """``nemesis.driver.Clocks`` through libfaketime's control file on each node (module docstring); a
    change counts as applied only when a probe confirms it within ``tolerance`` seconds."""

    def __init__(self, remotes: Mapping[str, Remote], faketime: FakeTime, *, tolerance: float = CLOCK_TOLERANCE) -> None:
        self.remotes = dict(remotes)
        self.faketime = faketime
        self.tolerance = tolerance

    def bump(self, deltas: Mapping[str, float]) -> Outcome:
        return clock_bump(self.remotes, deltas, self.faketime, self.tolerance)

    def strobe(self, targets: Sequence[str], delta: float, period: float, duration: float) -> Outcome:
        return clock_strobe(self.remotes, targets, delta, period, duration, self.faketime, self.tolerance)

    def reset(self, targets: Sequence[str]) -> Outcome:
        return clock_reset(self.remotes, targets, self.faketime, self.tolerance)
