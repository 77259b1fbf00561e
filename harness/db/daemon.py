"""A DB adapter's long-running process on a node, found through its pid file: start it in the background,
ask whether it runs, signal it (kill, stop, pause, resume) and read the end of its output.

What Jepsen's ``start-daemon!`` and ``stop-daemon!`` give a Jepsen test, for a DB adapter's ``Process``
and ``Pause`` capabilities (``harness.db``). Everything runs as one ``sh`` script per call through the
node's ``Remote``, so it works the same on containers and SSH hosts; the node needs ``sh``, ``nohup``,
``setsid`` (util-linux; without it the process is started in the caller's session) and, to wait for a
port, ``ss`` (iproute2).

The rules it keeps, each learnt from a run that went wrong without it:

* A process is known by what the kernel says of it, never by its command line: at start the pid is
  recorded beside the pid file (``<pid_file>.id``) with the process's start time (``/proc/<pid>/stat``,
  clock ticks since boot), the host's boot id and, once it is up, its executable (``/proc/<pid>/exe``).
  A pid counts as the process only while all four still match and it is not a zombie. A stale record,
  or a pid the kernel has since given to another process (after a container restart the pid namespace
  starts again, and the checking shell itself may get the recorded pid), is never signalled, and is
  removed. Matching the command line instead once made the checking shell find itself and SIGKILL
  itself; it also lost processes that rewrite their title (setproctitle).
* The process is started in a session of its own (``setsid``): a timeout of the remote command that
  started it signals that command's process group, never the system it started.
* Waits are measured in seconds of the node's uptime clock, not in loop iterations, so a loaded node
  does not stretch them past the remote command's own timeout.
* While it starts, the process is the starting shell's own child and is checked by pid alone: for an
  instant it is still ``setsid``, ``env`` or ``nohup`` (they exec the program); its executable is
  recorded once it is none of them.
* ``kill -STOP`` returns before every thread of the process has stopped (a thread in an uninterruptible
  wait, an fsync, takes the signal when the wait ends): a pause waits until the kernel shows state ``T``.
  A kill waits until the process is gone.
* A process under the ``clock`` nemesis is started with libfaketime's environment and without an
  inherited ``FAKETIME`` (which would override the control file): ``env -u FAKETIME``.

A daemon is described once and used by every method of an adapter::

    daemon = Daemon(
        argv=("/opt/mydb/bin/mydb", "--name", node, "--data", "/var/lib/mydb"),
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

from harness.db import Deployment, NodeStartError

if TYPE_CHECKING:
    from nemesis.remote import Remote

START_TIMEOUT_S = 60.0
"""Seconds a node's start may take before it is an error, by default: a start returns as soon as the
process listens, so a healthy node never waits for it; at a load average of 27 on 2 cores a Python node
took more than 20 s to listen (a run crashed in its deployment), hence the margin."""

_PID = "daemon_pid"
"""The shell function every script defines first: prints the daemon's pid, or fails if it does not run."""
_STAT = "daemon_stat"
"""Prints a pid's state letter and start time (``/proc/<pid>/stat`` fields 3 and 22), or fails."""
_NOW = "daemon_now"
"""Prints the node's uptime in hundredths of a second: the clock every wait is measured on."""
_GONE = "daemon_gone"
"""Succeeds once the recorded process has ended: no longer there, or a zombie. A process that is exiting
has lost its executable before it closes its files (its listening socket among them), so ``daemon_pid``
already fails while a client's connection can still be accepted and then reset: a kill waits for this."""
_LAUNCHERS = ("setsid", "env", "nohup")
"""What the start command execs through before it is the system's own program."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STARTED, RUNNING = "started", "running"
SENT, NOT_RUNNING = "sent", "not running"

_FUNCTIONS = (
    f"{_STAT}() {{\n"
    "  s=$(cat /proc/$1/stat 2>/dev/null) || return 1\n"
    '  s=${s##*) }\n'  # the command name in field 2 may hold spaces and parentheses: skip past its end
    "  set -- $s\n"
    '  [ -n "${20}" ] || return 1\n'
    '  echo "$1 ${20}"\n'
    "}\n"
    f"{_NOW}() {{\n"
    "  read up rest < /proc/uptime\n"
    "  echo $(( ${up%.*} * 100 + 1${up#*.} - 100 ))\n"
    "}\n"
)


class DaemonError(RuntimeError):
    """A signal could not be delivered, or did not take effect in time."""


@dataclass(frozen=True)
class Daemon:
    """One long-running process of a node.

    ``argv`` is its command line; ``pid_file`` where its pid is kept (the process may write the same pid
    there itself; the harness's own record of the process is ``<pid_file>.id``); ``output_file`` where its
    stdout and stderr are appended, with a line marking each start. ``cwd`` is the directory it starts in,
    ``env`` what is added to its environment, ``directories`` what must exist before it starts (its data
    directory, say; the pid and output files' directories are created anyway). ``name`` is how messages
    call it. ``identity`` is no longer needed (the process is known by its pid, start time and executable,
    not by its command line) and is ignored; it is accepted so that adapters written for earlier versions
    keep working.
    """

    argv: Sequence[str]
    pid_file: str
    output_file: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    directories: Sequence[str] = ()
    name: str = "the process"
    identity: str | None = None

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a daemon needs a command line (argv is empty)")
        for key in self.env:
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"not an environment variable name: {key!r} (letters, digits and _)")

    @property
    def record_file(self) -> str:
        """Where the harness records the process it started: ``pid start-time boot-id executable``."""
        return f"{self.pid_file}.id"

    # -- scripts ----------------------------------------------------------------------------------------

    def pid_function(self) -> str:
        """The shell functions every script starts with; ``daemon_pid`` prints the pid if the recorded
        process is alive (not a zombie): the same pid, start time, boot and (once recorded) executable, and
        neither the checking shell nor its parent. It fails otherwise. ``daemon_gone`` succeeds once that
        process has ended (gone or a zombie), however it looks while it exits."""
        record = shlex.quote(self.record_file)
        return _FUNCTIONS + (
            # daemon_recorded: the recorded process still exists, not yet a zombie (it sets _pid and _exe);
            # whether it is still the recorded program, daemon_pid and daemon_gone read differently
            "daemon_recorded() {\n"
            f"  read _pid _start _boot _exe < {record} 2>/dev/null || return 1\n"
            '  case "$_pid" in ""|*[!0-9]*) return 1 ;; esac\n'
            '  [ "$_pid" != "$$" ] && [ "$_pid" != "$PPID" ] || return 1\n'
            '  [ "$_boot" = "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" ] || return 1\n'
            f'  set -- $({_STAT} "$_pid")\n'
            '  case "$1" in Z|X|x|"") return 1 ;; esac\n'
            '  [ "$2" = "$_start" ]\n'
            "}\n"
            f"{_PID}() {{\n"
            "  daemon_recorded || return 1\n"
            '  [ "$_exe" = - ] || [ "$(readlink "/proc/$_pid/exe" 2>/dev/null)" = "$_exe" ] || return 1\n'
            '  echo "$_pid"\n'
            "}\n"
            f"{_GONE}() {{\n"
            "  daemon_recorded || return 0\n"
            # another program under that pid (an exec) is not ours; an exiting one has no executable left
            '  _now_exe=$(readlink "/proc/$_pid/exe" 2>/dev/null) && [ "$_exe" != - ] && [ "$_now_exe" != "$_exe" ] && return 0\n'
            "  return 1\n"
            "}\n"
        )

    def start_script(self, *, port: int | None, timeout: float) -> str:
        """The script :meth:`start` runs: prints ``running`` (it ran already) or ``started``; exits 3 if the
        process exited while starting, 4 if it did not listen on ``port`` within ``timeout`` seconds."""
        quote = shlex.quote
        record, pid_file = quote(self.record_file), quote(self.pid_file)
        directories = {str(d) for d in self.directories}
        directories |= {_parent(self.pid_file), _parent(self.output_file)}
        directories |= {self.cwd} if self.cwd else set()
        env = [f"{k}={v}" for k, v in self.env.items()]
        command = shlex.join(["env", "-u", "FAKETIME", *env, "nohup", *self.argv])
        launchers = " ".join(f'"$(readlink -f "$(command -v {name})" 2>/dev/null)"' for name in _LAUNCHERS)
        ready = 'exe=$(readlink "/proc/$launched/exe" 2>/dev/null) && ! launcher "$exe"'
        if port is not None:
            ready = f"ss -Hltn 'sport = :{int(port)}' | grep -q . && {ready}"
        not_ready = "did not start" if port is None else f"not listening on port {int(port)}"
        return (
            self.pid_function()
            + f"if {_PID} >/dev/null; then echo {RUNNING}; exit 0; fi\n"
            + f"mkdir -p {' '.join(quote(d) for d in sorted(directories))}\n"
            + f"rm -f {pid_file} {record}\n"
            + f"launcher() {{ for l in {launchers}; do [ \"$1\" = \"$l\" ] && return 0; done; return 1; }}\n"
            + "session=; command -v setsid >/dev/null 2>&1 && session=setsid\n"
            + f"echo \"=== $(date -u +%FT%TZ) starting\" >> {quote(self.output_file)}\n"
            + (f"cd {quote(self.cwd)} || exit 5\n" if self.cwd else "")
            + f"$session {command} >> {quote(self.output_file)} 2>&1 < /dev/null &\n"
            + "launched=$!\n"
            + f"echo $launched > {pid_file}\n"
            + f"set -- $({_STAT} $launched)\n"
            + "started_at=$2\n"
            + "[ -n \"$started_at\" ] || { echo 'the process exited'; exit 3; }\n"
            + "boot=$(cat /proc/sys/kernel/random/boot_id)\n"
            + f'echo "$launched $started_at $boot -" > {record}\n'
            + f"deadline=$(( $({_NOW}) + {max(1, round(timeout * 100))} ))\n"
            + "while :; do\n"
            + f"  case \"$({_STAT} $launched)\" in Z*|'') echo 'the process exited'; exit 3 ;; esac\n"
            + f"  if {ready}; then\n"
            + f'    echo "$launched $started_at $boot $exe" > {record}.new && mv {record}.new {record}\n'
            + f"    echo {STARTED}; exit 0\n"
            + "  fi\n"
            + f"  [ $({_NOW}) -lt $deadline ] || break\n"
            + "  sleep 0.1\n"
            + "done\n"
            + f"echo '{not_ready} after {timeout:g} s'; exit 4\n"
        )

    def signal_script(self, signal: str, *, wait: float) -> str:
        """The script :meth:`signal` runs: prints ``not running`` (and removes a stale record and pid file)
        or ``sent``; exits 3 if the signal did not take effect within ``wait`` seconds (KILL and TERM: the
        process is gone; STOP: it is stopped; CONT: it is no longer stopped). Other signals are sent without
        waiting."""
        if not signal.isalnum():
            raise ValueError(f"not a signal name: {signal!r}")
        state = f'{_STAT} "$pid" | cut -c1'
        effects = {
            "KILL": (_GONE, "still running"),
            "TERM": (_GONE, "still running"),
            "STOP": (f'[ "$({state})" = T ]', "not stopped"),
            "CONT": (f'[ "$({state})" != T ]', "still stopped"),
        }
        stale = f"rm -f {shlex.quote(self.record_file)} {shlex.quote(self.pid_file)}"
        deadline = f"deadline=$(( $({_NOW}) + {max(1, round(wait * 100))} ))\n"
        script = self.pid_function() + deadline
        # A process already exiting is not running, but a kill or a stop returns only once it has ended.
        ended = f"until {_GONE} || [ $({_NOW}) -ge $deadline ]; do sleep 0.1; done; " if signal in ("KILL", "TERM") else ""
        script += f"pid=$({_PID}) || {{ {ended}{stale}; echo '{NOT_RUNNING}'; exit 0; }}\n"
        script += f"kill -{signal} \"$pid\"\n"
        if signal in effects:
            until, failure = effects[signal]
            script += (f"until {until} || [ $({_NOW}) -ge $deadline ]; do sleep 0.1; done\n"
                       f"{until} || {{ echo '{failure} {wait:g} s after SIG{signal}' >&2; exit 3; }}\n")
        return script + f"echo {SENT}\n"

    # -- acting on a node ---------------------------------------------------------------------------------

    def running(self, remote: Remote, *, timeout: float = 30.0) -> bool:
        """Whether the process is alive (a paused one is)."""
        return remote.run(self.pid_function() + _PID, timeout=timeout, check=False).exit_code == 0

    def start(self, remote: Remote, *, port: int | None = None, timeout: float = START_TIMEOUT_S,
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


class DaemonProcess:
    """The ``Process`` and ``Pause`` capabilities (``start``, ``is_running``, ``kill``, ``pause``,
    ``resume``) of an adapter whose system is one process a node, from its ``daemon(deployment, node)``.

    Mix it into the adapter class and define ``daemon``; the class attributes (or instance attributes set in
    ``__init__``) tune it: ``start_timeout`` (seconds a start may take), ``stop_timeout`` (seconds a kill
    or pause may take to take effect), ``command_timeout`` (the remote command's own slack), ``daemon_port``
    (a start returns once the process listens there; None: once it runs), ``daemon_tail_lines`` (lines of
    output a failed start quotes). The etcd and NATS adapters use it.
    """

    start_timeout: float = START_TIMEOUT_S
    stop_timeout: float = 10.0
    command_timeout: float = 60.0
    daemon_port: int | None = None
    daemon_tail_lines: int = 20

    def daemon(self, deployment: Deployment, node: str) -> Daemon:
        """``node``'s process on its host."""
        raise NotImplementedError

    def start(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Start the process unless it runs; return once it listens on ``daemon_port``, or raise with the last
        lines of its output if it exits or does not within ``start_timeout``."""
        self.daemon(deployment, node).start(remote, port=self.daemon_port, timeout=self.start_timeout,
                                            command_timeout=self.command_timeout,
                                            tail_lines=self.daemon_tail_lines)

    def is_running(self, deployment: Deployment, node: str, remote: Remote) -> bool:
        """Whether the process is alive (a paused one is)."""
        return self.daemon(deployment, node).running(remote, timeout=self.command_timeout)

    def kill(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGKILL (a paused process dies too) and wait until it is gone; a dead process stays dead."""
        self.daemon(deployment, node).kill(remote, wait=self.stop_timeout)

    def pause(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGSTOP, returning once every thread has stopped (a thread in an fsync takes the signal only when
        the wait ends)."""
        self.daemon(deployment, node).pause(remote, wait=self.stop_timeout)

    def resume(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGCONT."""
        self.daemon(deployment, node).resume(remote)
