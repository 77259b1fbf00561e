"""The harness's exit ends Spark's JVM without a word from py4j: a connection still waiting for the JVM
when it is SIGKILLed (``harness.analysis.spark._end_jvm``) logged "Error while receiving." with a
``ConnectionResetError`` traceback at the exit of test processes that used Spark. And it ends the JVM
before it removes the JVM's scratch directory, even when the harness is stopped while PySpark waits for
the JVM to come up. No JVM needed: a process that takes one py4j command and never answers stands in for
it, and one that keeps making directories in its ``java.io.tmpdir`` for the other.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from py4j.clientserver import ClientServerConnection, JavaParameters, PythonParameters
from py4j.java_gateway import GatewayProperty
from py4j.protocol import Py4JNetworkError

from harness.analysis.spark import _end_jvm

# Takes a connection, sees a command come (left unread, so that the kill resets the connection as the JVM's
# death does), and never answers.
STANDIN_JVM = """
import socket, sys, time
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
connection, _ = server.accept()
connection.recv(1, socket.MSG_PEEK)
print("command", flush=True)
time.sleep(120)
"""


@pytest.fixture
def py4j_levels() -> Iterator[None]:
    """py4j's loggers as they were: ``_end_jvm`` silences them for the rest of the process."""
    names = ["py4j", *(name for name in list(logging.root.manager.loggerDict) if name.startswith("py4j."))]
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_a_py4j_call_under_way_when_the_jvm_is_killed_at_exit_logs_nothing(
    caplog: pytest.LogCaptureFixture, py4j_levels: None
) -> None:
    caplog.set_level(logging.INFO)  # the root logger as a run leaves it (harness.run, harness.log)
    jvm = subprocess.Popen([sys.executable, "-c", STANDIN_JVM], stdout=subprocess.PIPE, text=True)
    try:
        port = int(jvm.stdout.readline())
        connection = ClientServerConnection(
            JavaParameters(port=port), PythonParameters(), GatewayProperty(auto_field=False, pool=None), None
        )
        connection.connect_to_java_server()
        dropped: list[BaseException] = []

        def call() -> None:  # py4j's finalizer worker or a progress poller, asking the JVM
            try:
                connection.send_command("c\nt\nnanoTime\ne\n")
            except Py4JNetworkError as exc:
                dropped.append(exc)

        caller = threading.Thread(target=call, name="py4j-call")
        caller.start()
        assert jvm.stdout.readline() == "command\n"
        _end_jvm(jvm)
        caller.join(timeout=30)
        assert not caller.is_alive() and len(dropped) == 1  # the call did fail on the dropped connection
        assert isinstance(dropped[0].cause, ConnectionResetError), dropped[0].cause
        connection.close()
    finally:
        if jvm.poll() is None:
            jvm.kill()
        jvm.wait()
        jvm.stdout.close()
    assert jvm.returncode == -signal.SIGKILL
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("py4j")] == []


# Stopped while PySpark waits for the JVM's port: the JVM runs (here one Python process that keeps making a
# ``spark-*`` directory in the scratch, as SparkSubmit does in its first seconds), ``launch_gateway`` never
# returns. The stand-in is one process, as the JVM is: a shell running ``mkdir`` in a loop had a ``mkdir``
# forked before the kill make its directory after the scratch was removed (1 of the project's CI runs).
# The exit handler registered first runs last and gives the JVM, were it still alive, time to write again.
STOPPED_WHILE_SPARK_STARTS = """
import atexit, os, sys, time
atexit.register(time.sleep, 1.0)
import pyspark.java_gateway as java_gateway
from harness.analysis import spark
scratch = spark._jvm_scratch({})["spark.driver.extraJavaOptions"].split("-Djava.io.tmpdir=")[1]
print(scratch, flush=True)
writer = "import os, sys, time\\nwhile True:\\n os.makedirs(sys.argv[1], exist_ok=True)\\n time.sleep(0.01)"
with spark._dies_with_the_harness():
    java_gateway.Popen([sys.executable, "-c", writer, os.path.join(scratch, "spark-1")])
    deadline = time.monotonic() + 30
    while not os.path.isdir(os.path.join(scratch, "spark-1")) and time.monotonic() < deadline:
        time.sleep(0.01)  # until it writes there
    raise KeyboardInterrupt  # the harness's SIGTERM handler stops it this way
"""


def test_a_harness_stopped_while_the_jvm_starts_ends_it_before_removing_its_scratch(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", STOPPED_WHILE_SPARK_STARTS], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=60)
    scratch = Path(done.stdout.split()[0])
    assert scratch.parent == tmp_path and "KeyboardInterrupt" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.rglob("*"))
