"""The command contract of `nemesis.remote.Remote.run`, written once for every remote.

Both remotes turn a call into the same argv on the node (`node_argv`) and a finished command into the
same `CommandResult` or error (`finish`), so docker and SSH nodes behave identically: a ``str`` runs under
``sh -c``, a ``list`` runs as given, and a timeout is enforced on the node by coreutils ``timeout``
(which kills the command's whole process group), not merely abandoned by the controller.
"""

from __future__ import annotations

from nemesis.remote import Command, CommandResult, RemoteError, RemoteTimeout

KILL_AFTER_S = 1
"""Seconds between ``timeout``'s SIGTERM and its SIGKILL for a command that ignores SIGTERM."""

_TIMED_OUT_EXITS = (124, 137)  # coreutils timeout: 124 after SIGTERM, 128+9 after SIGKILL


def node_argv(cmd: Command, timeout: float | None) -> list[str]:
    """The argv to execute on the node for ``cmd``, wrapped in ``timeout`` when one is given."""
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ValueError("a command must not be empty")
        argv = ["sh", "-c", cmd]
    elif isinstance(cmd, list) and cmd and all(isinstance(arg, str) for arg in cmd):
        argv = list(cmd)
    else:
        raise TypeError(f"a command is a shell line (str) or a non-empty argv (list[str]), not {cmd!r}")
    if timeout is None:
        return argv
    if timeout <= 0:
        raise ValueError(f"a command timeout must be positive seconds, not {timeout!r}")
    return ["timeout", "-k", str(KILL_AFTER_S), f"{timeout:g}", *argv]


def describe(cmd: Command, limit: int = 80) -> str:
    """A one-line rendering of ``cmd`` for error messages."""
    text = " ".join((cmd if isinstance(cmd, str) else " ".join(cmd)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def _last_line(text: str, limit: int = 200) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no output"
    return lines[-1] if len(lines[-1]) <= limit else lines[-1][: limit - 3] + "..."


def finish(
    node: str,
    cmd: Command,
    exit_code: int,
    stdout: bytes | None,
    stderr: bytes | None,
    *,
    elapsed: float,
    timeout: float | None,
    check: bool,
) -> CommandResult:
    """The `CommandResult` of a finished command, or the `RemoteTimeout`/`RemoteError` it amounts to.

    ``elapsed`` is the controller's measure of the call: a ``timeout`` exit status counts as a timeout
    only if the call lasted at least ``timeout`` seconds, so a command that itself exits 124 is not
    mistaken for one.
    """
    result = CommandResult(exit_code, _decode(stdout), _decode(stderr))
    if timeout is not None and exit_code in _TIMED_OUT_EXITS and elapsed >= timeout:
        raise RemoteTimeout(node, f"`{describe(cmd)}` was still running after {timeout:g} s and was killed", result)
    if check and exit_code != 0:
        reason = _last_line(result.stderr or result.stdout)
        raise RemoteError(node, f"`{describe(cmd)}` exited {exit_code}: {reason}", result)
    return result
