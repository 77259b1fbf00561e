"""The Spark session of the analysis pipeline, set up so that the user never has to think about it.

What this module guarantees (ENVIRONMENT.md, "PySpark"):

* Python workers run the interpreter that runs the harness (``PYSPARK_PYTHON = sys.executable`` for local
  masters), so the virtual environment's packages (pandas, pyarrow, ``checkers``) are there in tasks;
* the JVM logs only errors, on stderr, and no progress bar of Spark's own is drawn (ours is rich's);
  the stack traces of Spark's own shutdown race are dropped when a session stops (:class:`StderrFilter`);
* no web UI, few shuffle partitions on a local master, driver memory sized for a small machine;
* the master comes from ``--spark-master``, else ``$SPARK_MASTER``, else ``local[*]``;
* a master that cannot be reached, a master URL Spark would not understand or a missing Java end in
  :class:`SparkUnavailable`: one sentence naming what is wrong and what to do (the CLI exits 254).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import IO, TYPE_CHECKING
from urllib.parse import urlsplit

from harness import lifecycle

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "SPARK_MASTER"
APP_NAME = "chaos-harness analysis"
# Seconds to wait for a TCP connection to a remote master before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0

_LOCAL = re.compile(r"^local(\[(\*|\d+)(,\s*\d+)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\d+,\s*\d+,\s*\d+\]$")

# Only errors, on stderr, one line each. Spark prints "Using Spark's default log4j profile" and its WARNs
# (native-hadoop, ...) when it finds no configuration of its own; this file is that configuration.
LOG4J2_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""
# Lines the JVM writes to stderr before any logging configuration applies; nothing a user can act on.
JVM_NOISE = (
    "WARNING: Using incubator modules",
    "Setting default log level to",
    "To adjust logging level use sc.setLogLevel",
)


class SparkUnavailable(RuntimeError):
    """Spark cannot be used as configured; the message is one sentence saying what to do."""


def resolve_master(option: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The master to use: the ``--spark-master`` option, else ``$SPARK_MASTER``, else ``local[*]``."""
    environ = os.environ if environ is None else environ
    master = option or environ.get(MASTER_ENV) or DEFAULT_MASTER
    return master.strip()


def is_local(master: str) -> bool:
    return bool(_LOCAL.match(master) or _LOCAL_CLUSTER.match(master))


def local_cores(master: str) -> int:
    """How many cores a ``local[...]`` master uses (``local`` is 1, ``local[*]`` all of this machine)."""
    match = _LOCAL.match(master)
    if not match or match.group(2) is None:
        return 1
    if match.group(2) == "*":
        return os.cpu_count() or 1
    return max(1, int(match.group(2)))


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs a remote master answers on; empty for local and YARN masters.

    Raises :class:`SparkUnavailable` for a URL Spark would not accept.
    """
    if is_local(master) or master == "yarn":
        return []
    if master.startswith("spark://"):
        endpoints = []
        for part in master[len("spark://") :].split(","):
            host, _, port = part.rpartition(":")
            if not host or not port.isdigit():
                raise SparkUnavailable(
                    f"Spark master {master!r} is not of the form spark://HOST:PORT; fix --spark-master "
                    f"or ${MASTER_ENV}"
                )
            endpoints.append((host.strip("[]"), int(port)))
        return endpoints
    if master.startswith("k8s://"):
        rest = master[len("k8s://") :]
        url = urlsplit(rest if "://" in rest else "https://" + rest)
        if not url.hostname:
            raise SparkUnavailable(
                f"Spark master {master!r} names no Kubernetes API server; fix --spark-master"
            )
        return [(url.hostname, url.port or (443 if url.scheme == "https" else 80))]
    raise SparkUnavailable(
        f"{master!r} is not a Spark master URL (local[*], local[N], spark://HOST:PORT, k8s://..., yarn); "
        f"fix --spark-master or ${MASTER_ENV}"
    )


def check_master_reachable(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast, in one sentence, when no endpoint of a remote master accepts a TCP connection.

    Spark itself would retry registering with an unreachable standalone master for about a minute and
    then stop the context with a stack trace; this check says it at once.
    """
    endpoints = master_endpoints(master)
    if not endpoints:
        return
    reasons = []
    for host, port in endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise SparkUnavailable(
        f"the Spark master {master} is unreachable ({'; '.join(reasons)}); start it, or analyse locally "
        f"with --spark-master 'local[*]'"
    )


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return True
    return shutil.which("java") is not None


def driver_memory(physical_bytes: int | None = None) -> str:
    """A quarter of the machine's memory, between 1 and 4 GiB: in local mode the driver is the executor,
    and the Python workers (one per core) need the rest."""
    if physical_bytes is None:
        try:
            physical_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            physical_bytes = 8 << 30
    gib = max(1, min(4, physical_bytes // 4 // (1 << 30)))
    return f"{gib}g"


def _log4j_file() -> str:
    path = os.path.join(tempfile.gettempdir(), f"chaos-harness-log4j2-{os.getuid()}.properties")
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == LOG4J2_PROPERTIES:
                return path
    except OSError:
        pass
    temporary = f"{path}.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(LOG4J2_PROPERTIES)
    os.replace(temporary, path)
    return path


NO_PERF_DATA = "-XX:-UsePerfData"
"""For every JVM the harness starts (the driver, and the launcher that spark-submit runs first): HotSpot
otherwise maps a performance-data file at ``/tmp/hsperfdata_<user>/<pid>`` (whatever ``java.io.tmpdir``
says), and the driver ends by SIGKILL with the harness (:func:`_end_jvm`), which left that file behind
after every analysis until another JVM started. Nothing here reads it (``jps``, ``jstat``)."""


def session_conf(master: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The configuration the harness starts Spark with; ``extra`` (``--spark-conf``) overrides it."""
    java_options = f"{NO_PERF_DATA} -Dlog4j2.configurationFile=file:{_log4j_file()}"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": driver_memory(),
        "spark.driver.extraJavaOptions": java_options,
        "spark.sql.session.timeZone": "UTC",
        # Re-analysing a run replaces its partitions of the dataset and nothing else.
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # Partition values are test names and timestamps: text, never numbers or dates.
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # One rename per file when the dataset is written, not two (the dataset tolerates a partial write:
        # re-analysis replaces a run's partitions whole).
        "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "2",
    }
    if is_local(master):
        cores = local_cores(master)
        conf.update(
            {
                # The JVM only moves bytes between files, Python and Parquet here, and lives for one
                # analysis: its optimising compiler cost more CPU than it saved (C1 alone: about half
                # the JVM's CPU, benchmarks/analysis_bench.py; cores the checkers' Python wants).
                "spark.driver.extraJavaOptions": f"-XX:TieredStopAtLevel=1 {java_options}",
                "spark.pyspark.python": sys.executable,
                "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
                "spark.default.parallelism": str(max(2, 2 * cores)),
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    conf.update(extra or {})
    return conf


def preflight(master: str) -> None:
    """What can be known about Spark without starting it: a usable master, Java, PySpark.

    ``harness suite`` calls this before its first run, so that a night of runs is not lost to an
    analysis that could never start. Raises :class:`SparkUnavailable`.
    """
    check_master_reachable(master)
    if not java_available():
        raise SparkUnavailable(
            "Spark needs Java and none is installed (no 'java' on PATH, no $JAVA_HOME): run "
            "scripts/install-java.sh (or scripts/setup.sh)"
        )
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailable(
            "PySpark is not installed in this Python environment: run scripts/setup.sh (or pip install "
            "pyspark 'pandas<3' pyarrow)"
        ) from None


def _not_py4j_noise(record: logging.LogRecord) -> bool:
    """False for py4j's tracebacks on the root logger that the harness says in one line of its own: a
    Ctrl-C (or SIGTERM) that landed during a call into the JVM ("interrupted"), and a call whose connection
    dropped because the JVM ended (:func:`jvm_ended`; the exception itself still reaches the caller)."""
    if not record.exc_info or record.exc_info[0] is None:
        return True
    kind, message = record.exc_info[0], record.getMessage()
    if kind is KeyboardInterrupt and message.startswith("KeyboardInterrupt while sending command"):
        return False
    dropped = issubclass(kind, ConnectionError) or kind.__name__ == "Py4JNetworkError"
    return not (dropped and message.startswith("Exception while sending command"))


def start_session(master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """Start (or join, in this process) the analysis Spark session. Raises :class:`SparkUnavailable`."""
    if _not_py4j_noise not in logging.getLogger().filters:
        logging.getLogger().addFilter(_not_py4j_noise)
    master = resolve_master(master)
    preflight(master)
    if is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:  # a cluster's workers may keep their own interpreter
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = session_conf(master, conf)
    _stopping.clear()
    builder = SparkSession.builder.master(master).appName(APP_NAME)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        _launch_quiet_gateway(master, settings)
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j and PySpark raise many types; all mean "cannot start"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailable(f"Spark did not start with master {master}: {first}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _launch_quiet_gateway(master: str, settings: Mapping[str, str]) -> None:
    """Start Spark's JVM (once per process) with its stderr filtered through :data:`JVM_NOISE`.

    PySpark would start it with the terminal as stderr; starting it here, with the same configuration,
    lets one daemon thread drop the JVM's start-up chatter and pass everything else (errors, Python
    worker tracebacks) through unchanged. The thread reads until the JVM exits, so the pipe never fills.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    _fatal.clear()
    spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(APP_NAME)
    for key, value in {**settings, **_jvm_scratch(settings)}.items():
        spark_conf.set(key, value)
    launcher = os.environ.get("SPARK_LAUNCHER_OPTS", "")  # spark-submit's launcher JVM reads its options here
    if NO_PERF_DATA not in launcher.split():
        os.environ["SPARK_LAUNCHER_OPTS"] = f"{launcher} {NO_PERF_DATA}".strip()
    with _dies_with_the_harness():
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    if gateway.proc is not None and gateway.proc.stderr is not None:
        threading.Thread(
            target=_forward_stderr, args=(gateway.proc.stderr,), name="spark-stderr", daemon=True
        ).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=spark_conf)


JVM_SCRATCH_PREFIX = "harness-spark-"
"""The JVM's temporary directory, in this process's (``TMPDIR``): made at its start, removed at exit."""


def _jvm_scratch(settings: Mapping[str, str]) -> dict[str, str]:
    """Driver options that put everything the JVM writes to temporary files (Spark's ``spark-*`` and
    ``artifacts-*`` directories, native libraries it unpacks, block manager files unless ``spark.local.dir``
    says otherwise) in one directory of this process's, removed when this process exits. The JVM ends by
    SIGKILL when the harness ends (:func:`_dies_with_the_harness`), before its own shutdown hooks delete
    them: every analysis left three empty directories and a native library in ``/tmp`` (measured: 297
    ``spark-*`` and 117 ``artifacts-*`` in two days of this machine's tests and benchmarks). A SIGKILLed
    harness still leaves its one directory behind."""
    scratch = tempfile.mkdtemp(prefix=JVM_SCRATCH_PREFIX)
    atexit.register(shutil.rmtree, scratch, True)
    if any(c.isspace() or c in "'\"" for c in scratch):  # Spark splits the options at spaces
        return {}
    options = settings.get("spark.driver.extraJavaOptions", "")
    return {"spark.driver.extraJavaOptions": f"{options} -Djava.io.tmpdir={scratch}".strip()}


def _end_jvm(proc: subprocess.Popen[bytes]) -> None:
    """At the harness's exit: SIGKILL Spark's JVM if it still runs (what its parent-death signal does a
    moment later anyway) and wait for it, so that nothing writes in its scratch directory any more.

    py4j is silenced first. Its threads may still be talking to the JVM when it dies (the finalizer worker
    releasing collected objects, a connection thread): each then logs the dropped connection, "Error while
    receiving." at INFO with its ``ConnectionResetError`` traceback (``py4j.clientserver``'s
    ``send_command``), printed at the exit of 2 of 3 CI runs' test processes that used Spark (the root
    logger takes INFO once ``harness.run`` has attached ``harness.log``). Nothing py4j says from here on is
    news."""
    _silence_py4j()
    if proc.poll() is None:
        proc.kill()
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def _silence_py4j() -> None:
    """No record of any level from py4j's loggers (``py4j``, and those below it that have a level of
    their own) from now on."""
    names = [name for name in list(logging.root.manager.loggerDict) if name.startswith("py4j.")]
    for name in ("py4j", *names):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextmanager
def _dies_with_the_harness() -> Iterator[None]:
    """While PySpark starts Spark's JVM in this block, the JVM asks the kernel to SIGKILL it when the
    harness ends, however it ends (prctl's parent-death signal, set between fork and exec after PySpark's
    own step, which ignores SIGINT).

    Without it, a harness stopped while Spark started (or SIGKILLed during its analysis) left the JVM
    behind for ever: py4j's server thread keeps it alive once its main thread is gone. PySpark sets its
    own ``preexec_fn`` over any given in ``popen_kwargs``, so the Popen it calls is wrapped for this block
    only. The signal fires when the *thread* that started the process ends, so it is asked for only from
    the main thread (every caller of :func:`start_session` today); from another thread the JVM still ends
    with the session or with its stdin, as before. From the moment it exists, the harness's exit ends it
    and waits for it (:func:`_end_jvm`) before the JVM's scratch directory is removed.
    """

    import pyspark.java_gateway as java_gateway

    libc = lifecycle.libc() if threading.current_thread() is threading.main_thread() else None
    parent = os.getpid()
    original = java_gateway.Popen

    def popen(command, **kwargs):  # noqa: ANN001, ANN202 - subprocess.Popen's own signature
        theirs = kwargs.get("preexec_fn")

        def preexec() -> None:
            if theirs is not None:
                theirs()
            if libc is not None:
                lifecycle.die_with_parent(parent, libc)

        process = original(command, **{**kwargs, "preexec_fn": preexec})
        # At once, not once the gateway is up: a signal while PySpark waits for the JVM's port ends the
        # harness with the JVM running, and its scratch directory (whose removal was registered before,
        # so runs after this: last in, first out) must not be removed while the JVM can still write there
        # (an empty ``spark-*`` in it was left after 1 of 20 SIGTERMs 0.5-4 s into ``harness run --analysis
        # spark``'s Spark start; tests/harness/test_spark_exit.py makes the race certain).
        atexit.register(_end_jvm, process)
        return process

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original


class StderrFilter:
    """What of the JVM's stderr reaches the user: everything but start-up chatter (:data:`JVM_NOISE`) and,
    once the session is stopping, the ``RejectedExecutionException`` reports of Spark's shutdown race.

    While a context stops, executors may still report task status to a scheduler whose thread pools are
    already shut; Spark logs each such report as an error with a stack trace (apache/spark#45203 quiets
    one of these places, others remain). Nothing is wrong and nothing is lost (every result was
    collected before the stop), so those reports, and only those, are dropped: an error line is held
    until the next line shows whether it starts such a report, and anything else passes unchanged.
    """

    def __init__(self, stopping: Callable[[], bool]) -> None:
        self._stopping = stopping
        self._held: str | None = None
        self._dropping = False

    def feed(self, line: str) -> list[str]:
        """The lines to print now, given the next line of the JVM's stderr."""
        if line.startswith(JVM_NOISE):
            return []
        if self._dropping:
            if line.startswith(_TRACE_CONTINUATION):
                return []
            self._dropping = False
        out: list[str] = []
        held, self._held = self._held, None
        if self._stopping() and _REJECTED in line:
            self._dropping = True  # the report, its stack and the error line announcing it all go
            return out
        if held is not None:
            out.append(held)
        if self._stopping() and line.startswith("spark ERROR "):
            self._held = line
            return out
        out.append(line)
        return out

    def flush(self) -> list[str]:
        held, self._held = self._held, None
        return [] if held is None else [held]


_REJECTED = "RejectedExecutionException"
_TRACE_CONTINUATION = ("\tat ", "\t... ", "Caused by: ", "\tSuppressed: ")
# Set while a session this module started is stopping (and after, until the next one starts).
_stopping = threading.Event()


# The JVM's last fatal error line (an OutOfMemoryError), for the sentence said when the JVM ends mid-analysis.
_fatal: list[str] = []
_FATAL = re.compile(r"java\.lang\.OutOfMemoryError: [^\n]*")


def _forward_stderr(stream: IO[bytes]) -> None:
    quiet = StderrFilter(_stopping.is_set)
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        fatal = _FATAL.search(line)
        if fatal:
            _fatal[:] = [fatal.group(0).strip()]
        _write(quiet.feed(line))
    _write(quiet.flush())


def _write(lines: Sequence[str]) -> None:
    for line in lines:
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed at interpreter exit: keep draining the pipe
            pass


@contextmanager
def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None) -> Iterator[SparkSession]:
    """A Spark session for the duration of a ``with`` block, stopped on every exit path.

    A session already running in this process (a test's shared one) is used as it is and left running:
    a process has one Spark context, and only a session this block started is stopped. The master is
    checked either way, so a bad ``--spark-master`` is always reported.
    """
    preflight(resolve_master(master))
    active = _active_session()
    if active is not None:
        yield active
        return
    spark = start_session(master, conf)
    try:
        yield spark
    except Exception as exc:
        ended = jvm_ended(exc)
        if ended is None:
            raise
        raise SparkUnavailable(ended) from None
    finally:
        _stopping.set()
        if jvm_ended() is None:
            spark.stop()


JVM_EXIT_WAIT_S = 15.0
"""How long an error that looks like the JVM's connection dropping waits for the JVM to be seen gone."""
JVM_ERROR_WAIT_S = 2.0
"""How long any other error from the JVM waits (an out-of-memory JVM may report a failed job first)."""


def jvm_ended(error: BaseException | None = None) -> str | None:
    """``None`` while the JVM this process started runs; once it has ended (out of memory, killed), one
    sentence saying so and what to do. ``error``, what the analysis raised, says whether to wait a moment
    for the JVM to finish exiting: a dropped py4j connection comes before the process is gone."""
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    if process is None:
        return None
    kind = type(error).__name__
    if isinstance(error, ConnectionError | EOFError) or kind == "Py4JNetworkError":
        wait = JVM_EXIT_WAIT_S
    else:
        wait = JVM_ERROR_WAIT_S if kind.startswith("Py4J") else 0.0
    try:
        status = process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return None
    if _fatal:
        return (f"Spark's JVM ran out of memory during the analysis ({_fatal[0]}); give it more with "
                "--spark-conf spark.driver.memory=8g (and the machine the memory), or analyse fewer runs at once")
    return f"Spark's JVM ended during the analysis (exit status {status}); its errors are above"


def _active_session() -> SparkSession | None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()
