"""DB adapters: what the controller needs from a system under test, as small protocols.

The core protocol, :class:`DB`, is what every system under test must offer: ``setup`` (install and start
on one node) and ``teardown`` (stop and wipe). Everything else is an optional *capability*, its own
protocol, checked when a test is composed (:func:`check_capabilities`): a test that asks for a fault the
DB cannot take fails before any container starts, with a sentence naming the missing capability.

**Declared capabilities.** An adapter says what it has with a class attribute of capability names,
``capabilities = ("Clients", "Process", "Pause", "Status")``. The declaration is authoritative: a
capability it leaves out is not used even if the methods exist. Composition checks every declared
capability against its protocol: each method exists, is callable, is a coroutine function where the
protocol's is (``async def``) and a plain one where it is not, and accepts the arguments the harness
passes. An adapter that declares nothing has the capabilities whose methods it has, judged the same way
(so a string attribute named like a method claims nothing). :func:`has_capability` is the one test of a
capability the harness makes; :data:`CAPABILITY_METHODS` is the registry of capabilities. Which ones a
nemesis needs, each nemesis package declares by name (``nemesis.generator.Package.needs``), read by
:func:`nemesis_needs` (and :data:`NEMESIS_CAPABILITIES`, the same as protocols).

=============  ====================================  ==========================================
capability     methods                               needed by
=============  ====================================  ==========================================
``Clients``    ``workloads``, ``async open_client``  any workload: one client per logical process
``Process``    ``start``, ``kill`` (SIGKILL)         the ``kill`` nemesis, restarting dead nodes
``Pause``      ``pause`` (SIGSTOP), ``resume``       the ``pause`` nemesis
``Status``     ``async status`` -> role/term/leader  leader targets, the leader timeline, recovery
``CatchUp``    ``async caught_up``                   final reads only where a node has caught up
``Simulation`` ``simulate(nodes, seed)``             the sim platform (deterministic simulator)
``LogFiles``   ``log_files`` -> remote -> local      collecting journals and logs into the store
``ClockSkew``  ``faketime_control_file``             the ``clock`` nemesis (libfaketime)
``Auxiliary``  ``extra_hosts``, ``fault_targets``,   processes besides the data nodes (see below)
``Processes``  ``run_files``
``ReplyPorts`` ``reply_ports``                       partitions (replies of request services)
=============  ====================================  ==========================================

Optional attributes: ``version()`` (what ``test.json`` records about the installed system; default
nothing), ``image`` (a derived node image the adapter needs on Docker; ``--image`` overrides it),
``preflight()`` (what the adapter needs on the controller, checked before anything is deployed: it raises
``ValueError`` with one sentence), ``not_applicable`` (checker name -> why it cannot judge this system,
e.g. ``{"lsn-monotonicity": "the system exposes no sequence numbers"}``: reported as not applicable,
never as unknown) and ``impossible`` (capability name -> why the system cannot have it, e.g.
``{"ClockSkew": "a Go binary reads the clock without libc"}``: said when a test asks for it).

**Status** (:data:`STATUS_FIELDS`, the ``value`` of an ``ok`` ``status`` operation in the history):
``role`` is ``"leader"`` when the node believes it leads, else ``"follower"``, ``"candidate"`` or another
word; ``term`` is the node's *current election term* (the term it would vote or lead in), not the term of
the last entry it applied, or ``None`` when the system has no terms (then single-leader-per-term is not
applicable rather than unknown); ``leader`` is the node it believes leads (optional, ``None`` when it
does not know); ``commit_lsn`` and ``last_lsn`` are ``[term, seq]`` or ``None`` (optional). A system
with a leader per shard, partition or queue adds ``groups`` (:data:`GROUPS`): one entry of
:data:`GROUP_FIELDS` per group the node takes part in; the top-level fields stay the node's view of the
cluster-level group (a system without one reports ``role`` ``"follower"`` and ``term`` ``None`` there).
A single-group system leaves ``groups`` out.

Every method takes the :class:`Deployment` (the nodes and their addresses, known once the platform has
brought the nodes up), the node's name and, when it acts on the node, its ``Remote``
(``nemesis.remote``). Methods that act through a Remote are synchronous, since Remotes are: the
interpreter runs them in a worker thread. ``status`` is a coroutine because it talks to the node
directly. A method raises when it could not do what it says; the caller records the error.

**Hosts, nodes and other processes.** A *data node* is a member the clients address (``Deployment.nodes``);
each runs on a host of its own name. Some systems run processes besides their data nodes (the fluvio
controller, a lease mode's external store group): the optional capability :class:`AuxiliaryProcesses`
says which extra hosts the platform must bring up, which processes the nemesis may aim process faults at,
and which files to collect where. ``setup`` and ``teardown`` act on a *host* (everything the system runs
there); ``Process``, ``Pause`` and ``Status`` act on one *process*, named as the nemesis names it. The
module functions :func:`hosts_of`, :func:`fault_targets` and :func:`collected_files` answer for any DB,
with or without the capability.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from nemesis import generator as nemesis_generator

if TYPE_CHECKING:
    from nemesis.remote import Remote

STATUS_FIELDS = ("node", "role", "term", "leader", "commit_lsn", "last_lsn")
"""The fields of a status observation (the ``value`` of an ``ok`` ``status`` completion)."""
GROUPS = "groups"
"""The optional status field of a system with a leader per group: a list of :data:`GROUP_FIELDS` entries."""
GROUP_FIELDS = ("group", "role", "term", "leader", "commit_lsn", "last_lsn")
"""The fields of one entry of a status's ``groups``: the node's view of one group (a storage shard, a
partition, a queue), with ``role``, ``term`` and ``leader`` meaning what the top-level fields mean for the
system's cluster-level group (docs/db-adapter.md, "The status contract")."""


@dataclass(frozen=True)
class Deployment:
    """The nodes of one test, as a DB adapter sees them.

    ``peer_hosts`` is the host name or address by which the *other nodes* reach a node (a container
    name on the Docker network, the host of an SSH node); ``client_hosts`` is the address by which the
    *controller* reaches it (a container's IP on an internal network, which has no DNS from the host).
    """

    nodes: tuple[str, ...]
    peer_hosts: Mapping[str, str]
    client_hosts: Mapping[str, str]
    extra_hosts: tuple[str, ...] = ()
    """Hosts that run none of the data nodes (the fluvio controller's ``sc``); addressed like nodes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "extra_hosts", tuple(self.extra_hosts))
        clash = sorted(set(self.nodes) & set(self.extra_hosts))
        if clash:
            raise ValueError(f"deployment names {', '.join(clash)} both as a data node and as an extra host")
        missing = [n for n in self.hosts if n not in self.peer_hosts or n not in self.client_hosts]
        if missing:
            raise ValueError(f"deployment has no address for node(s) {', '.join(missing)}")

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host of the deployment: one per data node (same name), then the extra hosts."""
        return self.nodes + self.extra_hosts


class NodeStartError(RuntimeError):
    """A node's process did not come up; the message ends with the last lines of its log."""


class StatusError(Exception):
    """A status request failed. ``definite``: the node certainly did not answer it (e.g. connection
    refused: the process is down); otherwise it may be slow or paused."""

    def __init__(self, message: str, *, definite: bool) -> None:
        super().__init__(message)
        self.definite = definite


@runtime_checkable
class DB(Protocol):
    """The core of a DB adapter: install-and-start, and stop-and-wipe, on one host."""

    name: str

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Install the system on host ``node`` and start what runs there; return once it is up."""
        ...

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Stop everything the system runs on host ``node`` (whatever its state); wipe data and logs."""
        ...


@runtime_checkable
class Process(Protocol):
    """Start and SIGKILL the system's process (Jepsen's ``db/Process``)."""

    def start(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Start the process if it is not running (idempotent); return once it is up."""
        ...

    def kill(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGKILL the process (idempotent: a dead process stays dead)."""
        ...

    def is_running(self, deployment: Deployment, node: str, remote: Remote) -> bool:
        """Whether the process is alive (a paused process is alive)."""
        ...


@runtime_checkable
class Pause(Protocol):
    """SIGSTOP and SIGCONT the system's process (Jepsen's ``db/Pause``)."""

    def pause(self, deployment: Deployment, node: str, remote: Remote) -> None: ...

    def resume(self, deployment: Deployment, node: str, remote: Remote) -> None: ...


@runtime_checkable
class Status(Protocol):
    """Ask a node who it thinks leads: a dict with :data:`STATUS_FIELDS` (module docstring: ``term`` is
    the current election term or ``None``; ``leader``, ``commit_lsn``, ``last_lsn`` may be ``None``).

    Raises :class:`StatusError` (or ``TimeoutError``) when the node does not answer.
    """

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]: ...


@runtime_checkable
class Clients(Protocol):
    """Open one client per logical process (Jepsen's ``Client``): the workload's operations go through it.

    ``workloads`` names the workloads whose operations the client executes (``register``: ``read``,
    ``write``, ``cas``; ``queue``: ``put``, ``consume``, ``confirm``). ``open_client`` returns an object
    with ``async invoke(op) -> completion`` and ``async close()`` (``harness.interpreter.WorkloadClient``).

    The completion is a mapping (or ``harness.interpreter.Completion``) with ``type``, ``value`` and
    optionally ``node``, ``lsn``, ``group`` (the group whose leader served it and whose ``lsn`` that
    is, in a system with a leader per group), ``error``; ``type`` follows FORMATS.md:

    * ``ok``: it happened; a read's ``value`` is what it read (``None`` for absent);
    * ``fail``: it certainly did not happen (refused before it could take effect, a precondition that
      failed: a ``cas`` whose expected value did not match is ``fail`` with an ``error`` that says so);
    * ``info``: unknown (a timeout, a lost connection after sending): it may have happened at any time
      after the invoke, or never. When in doubt, ``info``. A read that would end ``info`` may be
      recorded ``fail``: it has no effect.

    Raising from ``invoke`` counts as ``info``. The harness applies its own deadline (``--op-timeout``
    plus a second) on top of the client's; ``timeout`` is the client's own, a little shorter.

    A *local* read (``op.local``, sent by the final phase to every node in turn, with ``op.node`` set)
    must be answered by that node itself, never redirected, and must be linearizable at that node: it
    returns a state that includes every write acknowledged before the read was invoked (a read-index or
    quorum read served by that node), or fails. If the system cannot serve such a read on a follower,
    the client answers ``fail`` for it, and durability is judged on the nodes that answered.
    """

    workloads: tuple[str, ...]

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> Any: ...


@runtime_checkable
class CatchUp(Protocol):
    """Say when a node has caught up after the final heal, before its final reads are sent.

    ``caught_up`` answers whether ``node`` holds everything committed so far (e.g. its applied index has
    reached the leader's commit index). The final phase asks until it is true, bounded by the recovery
    timeout; a node that never catches up gets no final reads (recorded in the run's stats), so the
    durability checker judges only nodes that could answer. Without this capability every node gets its
    final reads once a leader has recovered.
    """

    async def caught_up(self, deployment: Deployment, node: str, timeout: float) -> bool: ...


@runtime_checkable
class Simulation(Protocol):
    """The adapter can run its system in the deterministic simulator (``harness run --platform sim``):
    ``simulate(nodes, seed)`` returns a ``harness.sim.system.SimulatedSystem`` whose every step the seed
    fixes."""

    def simulate(self, nodes: Sequence[str], seed: int) -> Any: ...


@runtime_checkable
class LogFiles(Protocol):
    """Which files on a node to collect: remote path -> file name under ``nodes/<node>/``.

    A node's journal (FORMATS.md) is collected as ``journal.jsonl``.
    """

    def log_files(self, deployment: Deployment, node: str) -> Mapping[str, str]: ...


@runtime_checkable
class ClockSkew(Protocol):
    """The system's process runs under libfaketime, steered by a control file the nemesis rewrites."""

    def faketime_control_file(self, deployment: Deployment, node: str) -> str: ...


@runtime_checkable
class AuxiliaryProcesses(Protocol):
    """The system runs processes besides its data nodes (a controller, an external store group).

    ``extra_hosts(nodes)``: hosts the platform must bring up beyond one per data node (their names are
    process names too: a host of its own, as the fluvio controller ``sc`` has). ``fault_targets(nodes)``:
    the processes the nemesis picks its targets from, the data nodes first (``Process``, ``Pause`` and
    ``Status`` accept each of them). ``run_files(deployment, host)``: every file to collect from one host,
    remote path -> path relative to the run's directory (``nodes/<node>/journal.jsonl`` for what the
    checkers read with the data nodes' journals, elsewhere for what they must not).
    """

    def extra_hosts(self, nodes: Sequence[str]) -> tuple[str, ...]: ...

    def fault_targets(self, nodes: Sequence[str]) -> tuple[str, ...]: ...

    def run_files(self, deployment: Deployment, host: str) -> Mapping[str, str]: ...


@runtime_checkable
class ReplyPorts(Protocol):
    """Some of the system's services on the nodes answer requests on the requester's connection (the
    lease mode's store members). ``reply_ports(deployment)`` names their ports, so that a partition
    also stops their replies reaching a node that must not hear from their host
    (``nemesis.shell.partition_commands``). Peer messages sent on the sender's own connection need
    nothing here."""

    def reply_ports(self, deployment: Deployment) -> tuple[int, ...]: ...


def reply_ports(db: object, deployment: Deployment) -> tuple[int, ...]:
    """The ports of ``db``'s request/response services on the nodes (:class:`ReplyPorts`); none if it
    declares none."""
    return tuple(db.reply_ports(deployment)) if has_capability(db, ReplyPorts) else ()


def hosts_of(db: object, nodes: Sequence[str]) -> tuple[str, ...]:
    """The hosts a deployment of ``db`` on ``nodes`` needs: one per data node, then the DB's extra hosts."""
    extra = db.extra_hosts(nodes) if has_capability(db, AuxiliaryProcesses) else ()
    return (*nodes, *extra)


def fault_targets(db: object, nodes: Sequence[str]) -> tuple[str, ...]:
    """The processes the nemesis picks from: the data nodes, plus what the DB declares killable and
    partitionable like a node."""
    return tuple(db.fault_targets(nodes)) if has_capability(db, AuxiliaryProcesses) else tuple(nodes)


def collected_files(db: object, deployment: Deployment, host: str) -> dict[str, str]:
    """Files to copy from ``host`` after a run: remote path -> path relative to the run's directory.

    A DB with :class:`AuxiliaryProcesses` says it itself; otherwise its :class:`LogFiles` of the host's
    node go under ``nodes/<host>/``.
    """
    if has_capability(db, AuxiliaryProcesses):
        return dict(db.run_files(deployment, host))
    if has_capability(db, LogFiles):
        return {remote: f"nodes/{host}/{name}" for remote, name in db.log_files(deployment, host).items()}
    return {}


class _NemesisCapabilities(Mapping[str, tuple[type, ...]]):
    """Nemesis name -> the capability protocols it needs: a live view of what each package declares
    (``nemesis.generator.Package.needs``), for every package that needs one, in package order."""

    def __getitem__(self, nemesis: str) -> tuple[type, ...]:
        return tuple(_needed(nemesis, name) for name in nemesis_needs()[nemesis])

    def __iter__(self) -> Iterator[str]:
        return iter(nemesis_needs())

    def __len__(self) -> int:
        return len(nemesis_needs())


def _needed(nemesis: str, name: str) -> type:
    capability = capability_named(name)
    if capability is None:
        raise MissingCapability(f"the {nemesis!r} nemesis needs the capability {name!r}, which the harness does "
                                f"not know (known: {', '.join(c.__name__ for c in CAPABILITY_METHODS)})")
    return capability


NEMESIS_CAPABILITIES: Mapping[str, tuple[type, ...]] = _NemesisCapabilities()
"""Which capabilities each nemesis needs from the DB, read from the packages' declarations. Partitions,
packet loss and latency act on the node's network through its shell; packages that may aim a fault at
the current leader also need Status."""


def protocol_members(protocol: type) -> tuple[str, ...]:
    """What a protocol asks for, in the order written: its attributes (``workloads``), then its methods."""
    attributes = tuple(vars(protocol).get("__annotations__", {}))
    return attributes + tuple(_protocol_methods(protocol))


def describe_capability(protocol: type) -> str:
    """The members of a capability as the messages name them: ``"workloads, open_client()"``."""
    methods = _protocol_methods(protocol)
    return ", ".join(f"{member}()" if member in methods else member for member in protocol_members(protocol))


def _protocol_methods(protocol: type) -> dict[str, Callable[..., Any]]:
    return {name: value for name, value in vars(protocol).items()
            if inspect.isfunction(value) and not name.startswith("_")}


CAPABILITY_METHODS: dict[type, str] = {
    capability: describe_capability(capability)
    for capability in (Clients, CatchUp, Simulation, Process, Pause, Status, LogFiles, ClockSkew, AuxiliaryProcesses,
                       ReplyPorts)
}
"""The registry of capabilities: each protocol an adapter may declare (by its class name), with its
members as the messages name them. A new capability is a protocol added here (by a test:
``monkeypatch.setitem``), named in the ``needs`` of the nemesis packages that need it."""

DECLARATION = "capabilities"
"""The adapter's class attribute that declares its capabilities: a tuple of names from the registry."""


class MissingCapability(ValueError):
    """A test asks for something its DB adapter cannot do; the message names the capability."""


def _adapter_name(db: object) -> str:
    return str(getattr(db, "name", type(db).__name__))


_KNOWN: dict[tuple[Any, ...], bool] = {}
"""What :func:`_is_async` and :func:`_accepts` found, by question and function: composing a test asks them of
every method of every capability (a 520-case suite asked 45,000 times: most of the time of loading it). A
method is asked by its class's function, the same for every adapter of that class; a callable that is
neither a function nor a method is asked each time."""


def _remembered(question: str, function: Any, expected: Any, answer: Callable[[], bool]) -> bool:
    if inspect.ismethod(function):
        key: tuple[Any, ...] | None = (question, "method", function.__func__, expected)
    elif inspect.isfunction(function):
        key = (question, "function", function, expected)
    else:
        return answer()
    known = _KNOWN.get(key)
    if known is None:
        known = _KNOWN[key] = answer()
    return known


def _is_async(function: Any) -> bool:
    return _remembered("async", function, None, lambda: _coroutine_function(function))


def _coroutine_function(function: Any) -> bool:
    try:
        return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(inspect.unwrap(function))
    except ValueError:  # a __wrapped__ chain that loops
        return inspect.iscoroutinefunction(function)


def _accepts(function: Any, expected: Callable[..., Any]) -> bool:
    """Whether ``function`` can be called with the arguments the protocol's ``expected`` method takes
    (placeholders for each, positional as the harness passes them)."""
    return _remembered("accepts", function, expected, lambda: _binds(function, expected))


def _binds(function: Any, expected: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read (a builtin): take it on trust
        return True
    params = list(inspect.signature(expected).parameters.values())[1:]  # without self
    args = [object() for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kwargs = {p.name: object() for p in params if p.kind is p.KEYWORD_ONLY}
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _arguments(expected: Callable[..., Any]) -> str:
    return "(" + ", ".join(list(inspect.signature(expected).parameters)[1:]) + ")"


def capability_problem(db: object, protocol: type) -> str | None:
    """Why ``db`` does not have what ``protocol`` asks for, as the end of a sentence (``"its kill() does
    not take the arguments (deployment, node, remote)"``), or ``None`` when it has all of it."""
    for attribute in vars(protocol).get("__annotations__", {}):
        if not hasattr(db, attribute):
            return f"it has no attribute {attribute}"
    for method, expected in _protocol_methods(protocol).items():
        found = getattr(db, method, None)
        if found is None:
            return f"it has no method {method}()"
        if not callable(found):
            return f"its {method} is a {type(found).__name__}, not a method"
        if _is_async(expected) and not _is_async(found):
            return f"its {method}() is not a coroutine function (the harness awaits it: write async def)"
        if not _is_async(expected) and _is_async(found):
            return f"its {method}() is a coroutine function (the harness calls it in a worker thread: write def)"
        if not _accepts(found, expected):
            return f"its {method}() does not take the arguments {_arguments(expected)}"
    return None


def capability_named(name: str) -> type | None:
    """The registered capability called ``name`` (its protocol's class name), or ``None``."""
    return next((capability for capability in CAPABILITY_METHODS if capability.__name__ == name), None)


def declared_capabilities(db: object) -> tuple[str, ...] | None:
    """The capability names ``db`` declares (its :data:`DECLARATION` attribute), or ``None`` if it declares
    none. :class:`MissingCapability` if the declaration is not a tuple of names."""
    declared = getattr(db, DECLARATION, None)
    if declared is None:
        return None
    if not isinstance(declared, tuple | list) or not all(isinstance(n, str) for n in declared):
        raise MissingCapability(
            f"the {_adapter_name(db)!r} DB adapter's {DECLARATION} must be a tuple of capability names, "
            f"such as (\"Process\", \"Status\"), not {declared!r}"
        )
    return tuple(declared)


def has_capability(db: object, capability: type) -> bool:
    """Whether ``db`` has ``capability``: whether it declares it, if it declares any (composition has
    checked the methods), else whether it has its methods with the right arguments."""
    declared = declared_capabilities(db)
    if declared is not None:
        return capability.__name__ in declared
    return capability_problem(db, capability) is None


def inferred_capabilities(db: object) -> list[str]:
    """The names of the registered capabilities whose methods ``db`` has with the right arguments, whatever
    it declares, in registry order."""
    return [capability.__name__ for capability in CAPABILITY_METHODS if capability_problem(db, capability) is None]


def capabilities(db: object) -> list[str]:
    """The names of the optional capabilities ``db`` has: what it declares (the registered ones, in its
    order), or else what it implements (:func:`inferred_capabilities`)."""
    declared = declared_capabilities(db)
    if declared is None:
        return inferred_capabilities(db)
    return [name for name in declared if capability_named(name) is not None]


def nemesis_needs() -> dict[str, tuple[str, ...]]:
    """Nemesis name -> the names of the capabilities it needs, for every nemesis that needs one: what each
    package declares (``nemesis.generator.Package.needs``), in package order."""
    return {name: tuple(package.needs) for name, package in nemesis_generator.PACKAGES.items() if package.needs}


def _lacks(db: object, capability: type, declared: tuple[str, ...] | None) -> str:
    """The end of a sentence saying that ``db`` lacks ``capability``, and why when it is not plain."""
    sentence = f"which the {_adapter_name(db)!r} DB adapter does not have"
    problem = capability_problem(db, capability)
    if declared is not None and problem is None:
        return f"{sentence} (it has the methods but does not declare it in its {DECLARATION})"
    members = protocol_members(capability)
    if problem is not None and any(hasattr(db, member) for member in members):
        return f"{sentence} ({problem})"
    return sentence


def check_capabilities(db: object, nemeses: Iterable[str], *, workload: str | None = None) -> None:
    """Raise :class:`MissingCapability` if ``db`` is not a DB adapter, declares a capability it does not
    implement as its protocol says, cannot take one of the ``nemeses`` or cannot run ``workload``'s
    operations. Checked before anything is deployed."""
    name = _adapter_name(db)
    if not isinstance(db, DB):
        raise MissingCapability(f"{name} is not a DB adapter: it needs name, setup() and teardown()")
    problem = capability_problem(db, DB)
    if problem is not None:
        raise MissingCapability(f"{name} is not a DB adapter: {problem}")
    declared = declared_capabilities(db)
    for declared_name in declared or ():
        capability = capability_named(declared_name)
        if capability is None:
            known = ", ".join(c.__name__ for c in CAPABILITY_METHODS)
            raise MissingCapability(f"the {name!r} DB adapter declares the capability {declared_name!r}, which the "
                                    f"harness does not know (known: {known})")
        problem = capability_problem(db, capability)
        if problem is not None:
            raise MissingCapability(f"the {name!r} DB adapter declares the capability {declared_name} "
                                    f"({CAPABILITY_METHODS[capability]}), but {problem}")
    if workload is not None:
        if not has_capability(db, Clients):
            raise MissingCapability(
                f"the {workload!r} workload needs the DB capability Clients ({CAPABILITY_METHODS[Clients]}), "
                f"{_lacks(db, Clients, declared)} (docs/db-adapter.md, \"The client\")"
            )
        if workload not in tuple(db.workloads):
            raise MissingCapability(
                f"the {name!r} DB adapter's client runs the workloads {', '.join(db.workloads) or 'none'}, "
                f"not {workload!r}"
            )
    impossible = dict(getattr(db, "impossible", None) or {})
    needs = nemesis_needs()
    for nemesis in nemeses:
        for capability in (_needed(nemesis, need) for need in needs.get(nemesis, ())):
            if not has_capability(db, capability):
                why = impossible.get(capability.__name__)
                where = f"to the adapter's {DECLARATION} (and its methods)" if declared is not None else "to the adapter"
                remedy = (f"drop {nemesis!r} from --nemesis ({name} cannot have it: {why})" if why else
                          f"drop {nemesis!r} from --nemesis or add {capability.__name__} {where}")
                raise MissingCapability(
                    f"the {nemesis!r} nemesis needs the DB capability {capability.__name__} "
                    f"({describe_capability(capability)}), {_lacks(db, capability, declared)}; {remedy}"
                )


def db_version(db: object) -> Any:
    """What ``test.json`` records about the installed system: the adapter's ``version()``, if it has one."""
    version = getattr(db, "version", None)
    return version() if callable(version) else None


def not_applicable(db: object) -> dict[str, str]:
    """Checker name -> why it cannot judge runs of ``db``: what the adapter declares, and
    single-leader-per-term when the adapter can neither report status nor collect journals."""
    declared = getattr(db, "not_applicable", None) or {}
    found = {str(k): str(v) for k, v in dict(declared).items()}
    if not any(has_capability(db, capability) for capability in (Status, LogFiles, AuxiliaryProcesses)):
        found.setdefault(
            "single-leader-per-term",
            "the DB adapter reports no leaders or terms (no Status capability, no journals)",
        )
    return found
