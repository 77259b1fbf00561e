"""A DB adapter's long-running process on a node, found through its pid file: start it in the background,
ask whether it runs, signal it (kill, stop, pause, resume) and read the end of its output.

What Jepsen's ``start-daemon!`` and ``stop-daemon!`` give a Jepsen test, for a DB adapter's ``Process``
and ``Pause`` capabilities (``harness.db``). Everything runs as one ``sh`` script per call through the
node's ``Remote``, so it works the same on containers and SSH hosts; the node needs ``sh``, ``nohup``,
``ps`` (procps) and, to wait for a port, ``ss`` (iproute2).

The rules it keeps, each learnt from a run that went wrong without it:

* A pid counts as the process only while its command line (``/proc/<pid>/cmdline``) holds the daemon's
  ``identity`` as a run of whole arguments and the process is not a zombie: a stale pid file, or a pid the kernel has since given to another process,
  is never signalled.
* While it starts, the process is the starting shell's own child and is checked by pid alone: for an
  instant its command line is ``env``'s or ``nohup``'s (they exec the program), and would not match.
* ``kill -STOP`` returns before every thread of the process has stopped (a thread in an uninterruptible
  wait, an fsync, takes the signal when the wait ends): a pause waits until ``ps`` shows state ``T``.
  A kill waits until the process is gone.
* A process under the ``clock`` nemesis is started with libfaketime's environment and without an
  inherited ``FAKETIME`` (which would override the control file): ``env -u FAKETIME``.

A daemon is described once and used by every method of an adapter::

    daemon = Daemon(
        argv=("/opt/mydb/bin/mydb", "--name", node, "--data", "/var/lib/mydb"),
        identity=f"/opt/mydb/bin/mydb --name {node}",
        pid_file="/var/run/mydb.pid", output_file="/var/log/mydb/console.log",
        env=faketime.environment() if faketime else {},
    )
    daemon.start(remote, port=7300, timeout=20)      # NodeStartError with the output's last lines
    daemon.kill(remote)                              # SIGKILL, returns once the process is gone
    daemon.pause(remote); daemon.resume(remote)      # SIGSTOP (waits for state T), SIGCONT
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.db import NodeStartError

if TYPE_CHECKING:
    from nemesis.remote import Remote

_PID = "daemon_pid"
"""The shell function every script defines first: prints the daemon's pid, or fails if it does not run."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STARTED, RUNNING = "started", "running"
SENT, NOT_RUNNING = "sent", "not running"


class DaemonError(RuntimeError):
    """A signal could not be delivered, or did not take effect in time."""


@dataclass(frozen=True)
class Daemon:
    """One long-running process of a node.

    ``argv`` is its command line; ``identity`` a run of whole arguments of it, joined by single spaces,
    that no other process on the node has (the program and its node name, say: ``-m mydb --id n1`` is
    not found in ``-m mydb --id n11``); ``pid_file`` where its pid is kept (the process may write the same pid there itself);
    ``output_file`` where its stdout and stderr are appended, with a line marking each start. ``cwd`` is
    the directory it starts in, ``env`` what is added to its environment, ``directories`` what must exist
    before it starts (its data directory, say; the pid and output files' directories are created
    anyway). ``name`` is how messages call it.
    """

    argv: Sequence[str]
    identity: str
    pid_file: str
    output_file: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    directories: Sequence[str] = ()
    name: str = "the process"

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a daemon needs a command line (argv is empty)")
        if not self.identity.strip():
            raise ValueError("a daemon needs an identity: a piece of its command line no other process has")
        for key in self.env:
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"not an environment variable name: {key!r} (letters, digits and _)")

    # -- scripts ----------------------------------------------------------------------------------------

    def pid_function(self) -> str:
        """The shell function ``daemon_pid``: prints the pid if the process is alive (not a zombie) and its
        command line holds ``identity`` as whole arguments; fails otherwise."""
        pattern = shlex.quote(f" {self.identity} ")
        return (
            f"{_PID}() {{\n"
            f"  pid=$(cat {shlex.quote(self.pid_file)} 2>/dev/null) || return 1\n"
            '  [ -n "$pid" ] && [ -r /proc/$pid/cmdline ] || return 1\n'
            f"  case \" $(tr '\\0' ' ' < /proc/$pid/cmdline)\" in *{pattern}*) ;; *) return 1 ;; esac\n"
            '  case "$(ps -o stat= -p "$pid" 2>/dev/null)" in Z*|"") return 1 ;; esac\n'
            '  echo "$pid"\n'
            "}\n"
        )

    def start_script(self, *, port: int | None, timeout: float) -> str:
        """The script :meth:`start` runs: prints ``running`` (it ran already) or ``started``; exits 3 if the
        process exited while starting, 4 if it did not listen on ``port`` within ``timeout`` seconds."""
        quote = shlex.quote
        directories = {str(d) for d in self.directories}
        directories |= {_parent(self.pid_file), _parent(self.output_file)}
        directories |= {self.cwd} if self.cwd else set()
        env = [f"{k}={v}" for k, v in self.env.items()]
        command = shlex.join(["env", "-u", "FAKETIME", *env, "nohup", *self.argv])
        steps = max(1, int(timeout * 10))
        if port is None:
            ready = f"{_PID} >/dev/null"
        else:
            ready = f"ss -Hltn 'sport = :{int(port)}' | grep -q . && {_PID} >/dev/null"
        not_ready = "did not start" if port is None else f"not listening on port {int(port)}"
        return (
            self.pid_function()
            + f"if {_PID} >/dev/null; then echo {RUNNING}; exit 0; fi\n"
            + f"mkdir -p {' '.join(quote(d) for d in sorted(directories))}\n"
            + f"rm -f {quote(self.pid_file)}\n"
            + f"echo \"=== $(date -u +%FT%TZ) starting\" >> {quote(self.output_file)}\n"
            + (f"cd {quote(self.cwd)} || exit 5\n" if self.cwd else "")
            + f"{command} >> {quote(self.output_file)} 2>&1 < /dev/null &\n"
            + "launched=$!\n"
            + f"echo $launched > {quote(self.pid_file)}\n"
            + f"i=0; while [ $i -lt {steps} ]; do\n"
            + "  case \"$(ps -o stat= -p $launched 2>/dev/null)\" in Z*|'') echo 'the process exited'; exit 3 ;; esac\n"
            + f"  if {ready}; then echo {STARTED}; exit 0; fi\n"
            + "  sleep 0.1; i=$((i+1))\n"
            + "done\n"
            + f"echo '{not_ready} after {timeout:g} s'; exit 4\n"
        )

    def signal_script(self, signal: str, *, wait: float) -> str:
        """The script :meth:`signal` runs: prints ``not running`` or ``sent``; exits 3 if the signal did not
        take effect within ``wait`` seconds (KILL and TERM: the process is gone; STOP: it is stopped; CONT:
        it is no longer stopped). Other signals are sent without waiting."""
        if not signal.isalnum():
            raise ValueError(f"not a signal name: {signal!r}")
        steps = max(1, int(wait * 10))
        stat = "ps -o stat= -p \"$pid\""
        effects = {
            "KILL": (f"! {_PID} >/dev/null", "still running"),
            "TERM": (f"! {_PID} >/dev/null", "still running"),
            "STOP": (f"{stat} | grep -q '^T'", "not stopped"),
            "CONT": (f"! {stat} | grep -q '^T'", "still stopped"),
        }
        script = self.pid_function() + f"pid=$({_PID}) || {{ echo '{NOT_RUNNING}'; exit 0; }}\n"
        script += f"kill -{signal} \"$pid\"\n"
        if signal in effects:
            until, failure = effects[signal]
            script += (f"i=0; until {until} || [ $i -ge {steps} ]; do sleep 0.1; i=$((i+1)); done\n"
                       f"{until} || {{ echo '{failure} {wait:g} s after SIG{signal}' >&2; exit 3; }}\n")
        return script + f"echo {SENT}\n"

    # -- acting on a node ---------------------------------------------------------------------------------

    def running(self, remote: Remote, *, timeout: float = 30.0) -> bool:
        """Whether the process is alive (a paused one is)."""
        return remote.run(self.pid_function() + _PID, timeout=timeout, check=False).exit_code == 0

    def start(self, remote: Remote, *, port: int | None = None, timeout: float = 20.0,
              command_timeout: float = 30.0, tail_lines: int = 20) -> bool:
        """Start the process unless it runs; return once it listens on ``port`` (on any address of the
        node), or, without a port, once it runs. True if it was started, False if it ran already. Raises
        :class:`NodeStartError` naming the cause and ending with the output's last ``tail_lines`` lines."""
        result = remote.run(self.start_script(port=port, timeout=timeout), timeout=timeout + command_timeout,
                            check=False)
        outcome = _last_line(result.stdout)
        if result.exit_code == 0 and outcome in (STARTED, RUNNING):
            return outcome == STARTED
        reason = outcome or result.stderr.strip() or f"exit code {result.exit_code}"
        raise NodeStartError(f"{remote.name}: {self.name} did not start ({reason}); "
                             f"{self.output_tail(remote, tail_lines, timeout=command_timeout)}")

    def signal(self, remote: Remote, signal: str, *, missing_ok: bool, wait: float = 10.0,
               command_timeout: float = 30.0) -> bool:
        """Send ``signal`` (a name: ``KILL``, ``TERM``, ``STOP``, ``CONT``) and wait until it took effect.
        True if it was sent; False if the process does not run, which raises :class:`DaemonError` unless
        ``missing_ok``, as does a signal that did not take effect within ``wait`` seconds."""
        result = remote.run(self.signal_script(signal, wait=wait), timeout=wait + command_timeout, check=False)
        outcome = _last_line(result.stdout)
        if result.exit_code != 0:
            reason = result.stderr.strip() or outcome or f"exit code {result.exit_code}"
            raise DaemonError(f"{remote.name}: SIG{signal} to {self.name}: {reason}")
        if outcome == NOT_RUNNING and not missing_ok:
            raise DaemonError(f"{remote.name}: {self.name} is not running, so it cannot take SIG{signal}")
        return outcome == SENT

    def kill(self, remote: Remote, *, wait: float = 10.0) -> None:
        """SIGKILL (a paused process dies too) and return once it is gone; a dead process stays dead."""
        self.signal(remote, "KILL", missing_ok=True, wait=wait)

    def stop(self, remote: Remote, *, wait: float = 10.0) -> None:
        """SIGTERM (after SIGCONT, so that a paused process can act on it); SIGKILL if it outlives ``wait``."""
        self.signal(remote, "CONT", missing_ok=True)
        try:
            self.signal(remote, "TERM", missing_ok=True, wait=wait)
        except DaemonError:
            self.kill(remote, wait=wait)

    def pause(self, remote: Remote, *, wait: float = 10.0) -> None:
        """SIGSTOP, returning once every thread has stopped; an error if the process does not run."""
        self.signal(remote, "STOP", missing_ok=False, wait=wait)

    def resume(self, remote: Remote) -> None:
        """SIGCONT; an error if the process does not run."""
        self.signal(remote, "CONT", missing_ok=False)

    def output_tail(self, remote: Remote, lines: int = 20, *, timeout: float = 30.0) -> str:
        """The last ``lines`` lines of the output file, introduced for an error message; never raises."""
        path = self.output_file
        try:
            tail = remote.run(f"tail -n {int(lines)} {shlex.quote(path)}", timeout=timeout, check=False)
        except Exception as exc:  # noqa: BLE001 - the tail is a courtesy; its absence must not hide the cause
            return f"its output {path} could not be read: {exc}"
        return f"last lines of {path}:\n{tail.stdout.rstrip() or '(empty)'}"


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""
