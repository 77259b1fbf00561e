"""Sequential specifications ("models") that the linearizability checker holds a history against.

A model says what one operation does to the state of one object when it takes effect atomically: a
register, a compare-and-set register, a key-value map (one string per key), a FIFO queue of messages
(``queue``), and Knossos' others: a lock (``mutex``), a set, registers written together by transactions
(``multi-register``), FIFO and unordered queues of plain values. The checker
(``checkers.linearizability``) searches for an order of the operations that respects real time and that
the model accepts; the model never sees time.

How a model reads each completion type (FORMATS.md; Porcupine's ``Model``, Knossos' ``model`` step):

* ``ok``: the operation took effect once between its invoke and its completion, and its output (what a
  read returned, which message a consume got) must be what the model produces at that point.
* ``info`` (timeout, lost connection, no completion at all): the operation may have taken effect at any
  point after its invoke, or never. Its output is unknown, so the model only applies its effect. The
  checker gives it no return time; "never" is the same as "after every other operation".
* ``fail``: the operation did not happen, and is left out, with one exception: a compare-and-set that
  *executed* and returned false because its precondition did not hold. That says something: at the
  point where it took effect the register did not hold the expected value. Only an explicit error says
  so (:data:`CAS_RETURNED_FALSE_ERRORS`):

  - ``"cas-mismatch"``: the bundled cluster's code for it (``cluster.core.errors``);
  - ``"precondition-failed"``: the same meaning under another common name.

  A ``fail`` cas with no error, or any other error (``not-leader``, ``no-quorum``, ...), did not happen
  and is dropped, as Knossos drops every ``:fail``: this never raises a false alarm on a correct
  history. (Jepsen's etcd client records a cas that returned false as ``:fail`` with no reason, and
  Porcupine's etcd model reads that as "executed, returned false"; reading it as "did not happen" is
  weaker but never wrong, and changes none of the Porcupine corpus's verdicts.) A Jepsen client that
  wants the stronger check records such a cas as ``{:type :fail, :error :cas-mismatch}``.
  A ``fail`` read, get or consume did nothing and is left out.

**Semantics** (:data:`SEMANTICS`, ``get_model(..., semantics=)``, ``python -m checkers check
--semantics``). The default, ``strict``, is FORMATS.md's: an ``ok`` read of null says the register was
unset. ``knossos`` reads histories as Knossos' models do, so that a Jepsen user gets Knossos' verdicts: an
``ok`` read of nil says nothing (the value is unknown: ``register``, ``cas-register``, and a
``multi-register`` micro-read of nil), and every ``:fail`` is dropped, a cas that returned false
included. Registers start at nil in both, unless ``initial`` says otherwise (Knossos' CLI checks
``(cas-register)``, nil; some of its tests use ``(cas-register 0)``: ``--initial 0``).

A model turns each operation into a :class:`Transition` once (``prepare``): a function from state to the
next state (or :data:`REJECTED`), its argument, and whether it is *pure*. A pure transition never changes
any state (an ``ok`` read, a cas that returned false, a consume that found the queue empty); the checker
may linearize a pure operation as soon as real time allows it and the state accepts it, without trying
the alternatives (moving a pure operation earlier never invalidates a linearization).

States must be hashable: the checker memoises (linearized set, state) pairs. JSON lists and objects in
values are frozen into tuples for that; :meth:`KeyedModel.describe_state` shows them as JSON again.

A nondeterministic model (``nondeterministic = True``) returns, from each transition, the frozenset of
states the operation may lead to (empty: rejected); the checker then searches over sets of states, as
Porcupine does for its ``NondeterministicModel``. ``unordered-queue`` is (an ``info`` dequeue may have
taken any value); the others are deterministic.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from checkers.history import Operation


class _Rejected:
    """The model does not accept the operation in this state."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "REJECTED"


REJECTED: Final = _Rejected()

# A fail with one of these errors is a cas that executed and returned false (module docstring):
# "precondition-failed", and "cas-mismatch" (the bundled cluster's code for a committed cas whose register
# did not hold the expected value). A fail without an error did not happen.
CAS_RETURNED_FALSE_ERRORS: Final = frozenset({"precondition-failed", "cas-mismatch"})


class ModelError(ValueError):
    """An operation the model cannot read: an unknown ``f``, or a value of the wrong shape."""


class _AnyState:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY_STATE"


ANY_STATE: Final = _AnyState()


@dataclass(slots=True, eq=False)
class Transition:
    """One operation as the checker applies it: ``apply(state, arg)`` is the next state or REJECTED.

    Never changed once made (not frozen only because a frozen dataclass takes twice as long to create,
    and a history has one transition per operation).

    ``pure``: the transition never changes any state (module docstring). ``needs``: for a pure
    transition accepted in exactly one state (a read accepts only the value it returned), that state; the
    checker uses it to skip looking at pure operations no state in reach accepts.
    """

    apply: Callable[[Any, Any], Any]
    arg: Any
    pure: bool = False
    needs: Any = ANY_STATE
    # For an ``info`` operation the model knows took effect (it alone wrote a value some operation
    # observed): the time by which it did, which the checker then treats as its return.
    deadline: int | None = None


class Model(Protocol):
    """What the linearizability checker needs from a sequential specification."""

    name: str
    nondeterministic: bool
    semantics: str
    """How the model reads a history, one of :data:`SEMANTICS` (module docstring)."""

    def init(self) -> Hashable:
        """The state of one object (one key, one queue) before any operation."""
        ...

    def partition(self, ops: Iterable[Operation]) -> dict[Hashable, list[Operation]]:
        """Independent objects (P-compositionality): each group is checked on its own, in invoke order."""
        ...

    def prepare(self, op: Operation) -> Transition | None:
        """The operation as a transition, or None when it did not happen. Raises ModelError."""
        ...

    def prepare_group(self, ops: Sequence[Operation]) -> list[Transition | None]:
        """``prepare`` for each operation of one object, seeing them all (the checker calls this)."""
        ...

    def step(self, state: Hashable, op: Operation) -> tuple[bool, Any]:
        """Apply ``op`` at ``state`` as if it took effect now: (accepted, next state)."""
        ...

    def describe_operation(self, op: Operation) -> str:
        """One line for a person, e.g. ``p3 cas 1->4 (fail: returned false)``."""
        ...

    def describe_state(self, state: Any) -> str:
        """A state for a person, as JSON where it can be."""
        ...


# Freezing JSON values into hashable states. ``True == 1`` in Python, so booleans are tagged.

_TRUE: Final = ("\x00bool", True)
_FALSE: Final = ("\x00bool", False)


_SCALARS: Final = frozenset({int, str, float, type(None)})


def freeze(value: Any) -> Hashable:
    """A JSON value as a hashable value that compares like JSON (lists, objects and booleans kept apart)."""
    if type(value) in _SCALARS:
        return value
    if value is True:
        return _TRUE
    if value is False:
        return _FALSE
    if isinstance(value, list | tuple):
        return ("\x00list", *(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("\x00dict", *sorted((str(k), freeze(v)) for k, v in value.items()))
    return value


def thaw(value: Any) -> Any:
    """The JSON value that ``freeze`` made ``value`` from."""
    if isinstance(value, tuple) and value and isinstance(value[0], str) and value[0].startswith("\x00"):
        tag = value[0]
        if tag == "\x00bool":
            return value[1]
        if tag == "\x00list":
            return [thaw(v) for v in value[1:]]
        if tag == "\x00dict":
            return {k: thaw(v) for k, v in value[1:]}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def _json(value: Any) -> str:
    try:
        return json.dumps(thaw(value), sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


# Transitions. Each returns the next state, or REJECTED; pure ones return the state object itself.


def _read(state: Any, expected: Any) -> Any:
    return state if state == expected else REJECTED


def _write(state: Any, value: Any) -> Any:
    return value


def _cas(state: Any, arg: tuple[Any, Any]) -> Any:
    return arg[1] if state == arg[0] else REJECTED


def _cas_returned_false(state: Any, expected: Any) -> Any:
    return state if state != expected else REJECTED


def _cas_indeterminate(state: Any, arg: tuple[Any, Any]) -> Any:
    return arg[1] if state == arg[0] else state


_WRITE_UNSEEN: Final = Transition(_write, ("\x00unseen", None))


def _append(state: Any, suffix: str) -> Any:
    try:
        return state + suffix
    except TypeError:  # not a string: a write put something else there
        return REJECTED


class KeyedModel:
    """Shared behaviour: one independent object per ``key``; operations turned into transitions."""

    name = "keyed"
    nondeterministic = False
    functions: tuple[str, ...] = ()

    def __init__(self, semantics: str = "strict") -> None:
        self.semantics = _semantics(semantics)
        self.knossos = self.semantics == "knossos"  # read per operation by the models the semantics change

    def init(self) -> Hashable:
        return None

    def partition(self, ops: Iterable[Operation]) -> dict[Hashable, list[Operation]]:
        groups: dict[Hashable, list[Operation]] = {}
        get = groups.get
        scalars = _SCALARS
        for op in ops:
            key = op.key
            if key.__class__ not in scalars:
                key = freeze(key)
            group = get(key)
            if group is None:
                groups[key] = [op]
            else:
                group.append(op)
        return groups

    def prepare(self, op: Operation) -> Transition | None:
        raise NotImplementedError

    def prepare_group(self, ops: Sequence[Operation]) -> list[Transition | None]:
        return [self.prepare(op) for op in ops]

    def step(self, state: Hashable, op: Operation) -> tuple[bool, Any]:
        transition = self.prepare(op)
        if transition is None:
            return True, state
        new = transition.apply(state, transition.arg)
        if self.nondeterministic:
            return bool(new), new
        return new is not REJECTED, (state if new is REJECTED else new)

    def describe_state(self, state: Any) -> str:
        if state == UNSEEN:
            return "a value no operation observes"
        return _json(state)

    def describe_operation(self, op: Operation) -> str:
        text = f"p{op.process} {op.f}"
        if op.value is not None and op.f not in _RETURNS_A_VALUE:
            text += f" {_describe_value(op.f, op.value)}"
        if op.type == "ok":
            if op.f in _RETURNS_A_VALUE:
                text += f" -> {json.dumps(op.output, sort_keys=True)}"
            return text
        if op.type == "fail":
            if op.f == "cas" and op.error in CAS_RETURNED_FALSE_ERRORS:
                return text + " -> false (fail: precondition did not hold)"
            return text + f" (fail: {op.error or 'did not happen'})"
        return text + f" (info: {op.error or 'indeterminate'})"

    def _unknown(self, op: Operation) -> ModelError:
        fitting = models_with(op.f)
        hint = (f"models with {op.f!r}: {', '.join(fitting)}" if fitting else
                f"no model has {op.f!r}")
        return ModelError(
            f"operation {op.id} (history line {op.invoke_index + 1}): f {op.f!r} is not part of the "
            f"{self.name} model ({', '.join(self.functions)}); {hint}"
        )


_RETURNS_A_VALUE: Final = frozenset({"read", "get", "consume", "dequeue"})


def _describe_value(f: str, value: Any) -> str:
    if f == "cas" and isinstance(value, list | tuple) and len(value) == 2:
        return f"{json.dumps(value[0])}->{json.dumps(value[1])}"
    return json.dumps(value, sort_keys=True)


def _cas_argument(op: Operation) -> tuple[Any, Any]:
    value = op.value
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ModelError(
            f"operation {op.id} (history line {op.invoke_index + 1}): cas value must be "
            f"[expected, new], not {value!r}"
        )
    return freeze(value[0]), freeze(value[1])


class RegisterModel(KeyedModel):
    """A register per key, initially null: ``read`` returns it, ``write`` sets it, and with ``cas``
    (the compare-and-set register) ``[expected, new]`` sets ``new`` iff it holds ``expected``."""

    def __init__(self, *, cas: bool, initial: Any = None, semantics: str = "strict") -> None:
        self.cas = cas
        self.name = "cas-register" if cas else "register"
        self.functions = ("read", "write", "cas") if cas else ("read", "write")
        self.initial = freeze(initial)
        super().__init__(semantics)

    def init(self) -> Hashable:
        return self.initial

    def prepare(self, op: Operation) -> Transition | None:
        if op.f not in self.functions:
            raise self._unknown(op)
        if self.knossos and _knossos_ignores(op):
            return None
        return _register_transition(self, op, read_absent=None)

    def refute(self, ops: Sequence[Operation], transitions: Sequence[Transition]) -> Any:
        """A violation real time alone proves, if any (:func:`_refute_registers`); the checker asks
        before searching."""
        if type(self).prepare is not RegisterModel.prepare:
            return None
        return _refute_registers(ops, transitions, self.initial)

    def prepare_group(self, ops: Sequence[Operation]) -> list[Transition | None]:
        if type(self).prepare is not RegisterModel.prepare:  # a subclass with operations of its own
            return super().prepare_group(ops)
        reads: dict[Any, Transition] = {}
        functions = self.functions
        out: list[Transition | None] = []
        append = out.append
        knossos = self.knossos
        info = False
        scalars = _SCALARS
        for op in ops:
            f = op.f
            if f not in functions:
                raise self._unknown(op)
            kind = op.type
            if knossos and _knossos_ignores(op):
                append(None)
                continue
            if kind == "info":
                info = True
            if f == "read":  # _register_transition's first two cases, inline: most of a history
                if kind != "ok":
                    append(None)
                    continue
                output = op.output
                if output.__class__ not in scalars:
                    output = freeze(output)
                shared = reads.get(output)
                if shared is None:
                    shared = reads[output] = Transition(_read, output, pure=True, needs=output)
                append(shared)
            elif f == "write":
                if kind == "fail":
                    append(None)
                    continue
                value = op.value
                append(Transition(_write, value if value.__class__ in scalars else freeze(value)))
            elif f == "cas" and kind == "ok":
                value = op.value
                if value.__class__ is list and len(value) == 2:  # (else _cas_argument says what is wrong)
                    expected, new = value
                    append(Transition(_cas, (
                        expected if expected.__class__ in scalars else freeze(expected),
                        new if new.__class__ in scalars else freeze(new),
                    )))
                else:
                    append(_register_transition(self, op, None, reads))
            else:
                append(_register_transition(self, op, None, reads))
        if not info:  # _observed_info and _unseen change only info operations
            return out
        return _unseen(ops, _observed_info(ops, out, self.initial), self.initial)


def _knossos_ignores(op: Operation) -> bool:
    """What Knossos' register models take no constraint from: an ``ok`` read of nil (value unknown) and
    any ``fail`` (a cas that returned false included)."""
    return op.type == "fail" or (op.type == "ok" and op.output is None and op.f in ("read", "get"))


def _refute_registers(
    ops: Sequence[Operation], transitions: Sequence[Transition], initial: Any
) -> tuple[int, list[tuple[int, Any]]] | None:
    """A stale read that real time alone proves, on a register whose values are each written once
    (the register workload's), without any search: ``(the read, [(writer, value), (overwriter,
    value)])``, or None.

    An ``ok`` read ``R`` returned ``v``, written by only one operation ``W`` (or ``v`` is the initial
    value and nothing writes it). If some write or cas ``X`` that surely took effect (``ok``) began
    after ``W`` ended and ended before ``R`` began, then in every order ``W`` precedes ``X`` precedes
    ``R``, and nothing writes ``v`` after ``X``: ``R`` cannot return ``v``. This is only a necessary
    condition: when it does not fire, the search decides. When it does, it decides at once what the
    search may need exponential time to exhaust (20 concurrent processes and a stale read: issue 13).
    """
    writers: dict[Any, list[int]] = {}
    overwrites: list[tuple[int, int, int, Any]] = []  # (call, ret, index, value written) of ok writes
    for i, (op, t) in enumerate(zip(ops, transitions, strict=True)):
        if t.apply is _write:
            writers.setdefault(t.arg, []).append(i)
            if op.ret is not None:
                overwrites.append((op.call, op.ret, i, t.arg))
        elif t.apply is _cas or t.apply is _cas_indeterminate:
            writers.setdefault(t.arg[1], []).append(i)
            if op.ret is not None and t.apply is _cas:
                overwrites.append((op.call, op.ret, i, t.arg[1]))
    if not overwrites:
        return None
    overwrites.sort()
    calls = [o[0] for o in overwrites]
    # suffix[j]: the overwrite that ends first among those invoked at calls[j] or later
    suffix: list[tuple[int, int, int, Any]] = [overwrites[-1]] * len(overwrites)
    earliest = overwrites[-1]
    for j in range(len(overwrites) - 2, -1, -1):
        o = overwrites[j]
        if o[1] <= earliest[1]:  # (as min() does: the first of equals)
            earliest = o
        suffix[j] = earliest
    for r, (op, t) in enumerate(zip(ops, transitions, strict=True)):
        if t.apply is not _read or op.ret is None:
            continue
        value = t.arg
        producers = writers.get(value, [])
        if value == initial and not producers:
            after, forced = -1, []
        elif len(producers) == 1 and value != initial and ops[producers[0]].ret is not None:
            w = producers[0]
            after, forced = ops[w].ret, [(w, value)]
        else:
            continue
        j = bisect.bisect_right(calls, after)
        if j < len(suffix) and suffix[j][1] < op.call:
            _, _, x, written = suffix[j]
            return r, [*forced, (x, written)]
    return None


# The one value standing for every value no operation of the key observes (see _unseen).
UNSEEN: Final = ("\x00unseen", None)


def _observed_info(
    ops: Sequence[Operation], transitions: list[Transition | None], initial: Any
) -> list[Transition | None]:
    """``info`` writes and cas the history shows took effect, given a deadline (exact).

    When exactly one operation of the key writes a value ``v`` (a write of ``v``, a cas to ``v``; and
    ``v`` is not the initial value), every ``ok`` read that returned ``v`` and every ``ok`` cas that
    expected ``v`` saw that operation's effect. So if it ended ``info``, it took effect, and before the
    earliest return of those: it gets that return time as a deadline (and an ``info`` cas becomes one
    that succeeded). Without this, an ``info`` operation stays pending to the end of the history and
    the search tries every subset of the pending ones; the register workload writes unique values, so
    this bounds nearly every ``info`` write of a chaos run.
    """
    producers: dict[Any, int] = {initial: 1}
    observed_by: dict[Any, int] = {}
    for op, t in zip(ops, transitions, strict=True):
        if t is None:
            continue
        if t.apply is _write:
            producers[t.arg] = producers.get(t.arg, 0) + 1
        elif t.apply is _cas or t.apply is _cas_indeterminate:
            producers[t.arg[1]] = producers.get(t.arg[1], 0) + 1
        if op.ret is None:
            continue
        seen = t.arg if t.apply is _read else t.arg[0] if t.apply is _cas else None
        if seen is not None or t.apply is _read:
            if seen not in observed_by or op.ret < observed_by[seen]:
                observed_by[seen] = op.ret
    out: list[Transition | None] = []
    for op, t in zip(ops, transitions, strict=True):
        if t is not None and op.type == "info" and t.apply in (_write, _cas_indeterminate):
            value = t.arg if t.apply is _write else t.arg[1]
            deadline = observed_by.get(value)
            if deadline is not None and producers.get(value) == 1 and deadline > op.call:
                t = Transition(_write if t.apply is _write else _cas, t.arg, deadline=deadline)
        out.append(t)
    return out


def _unseen(
    ops: Sequence[Operation], transitions: list[Transition | None], initial: Any
) -> list[Transition | None]:
    """Values that no operation of the key observes, written by ``info`` operations, as one anonymous
    value (exact).

    Whether a register operation is accepted depends only on whether the register holds certain values:
    the value an ``ok`` read returned, the expected value of a cas (``ok``, ``info`` or returned
    false). A value none of them names is told apart from another such value by nothing, so writing
    :data:`UNSEEN` in its place accepts and rejects exactly the same orders. ``info`` writes of
    unobserved values so become identical, and identical ``info`` operations are interchangeable to the
    search (only the earliest pending one is tried): ``k`` of them cost ``k + 1`` states, not ``2^k``.
    (``ok`` writes keep their values, so that a counterexample shows them.)
    """
    observed = {initial}
    for t in transitions:
        if t is None:
            continue
        if t.apply is _read or t.apply is _cas_returned_false:
            observed.add(t.arg)
        elif t.apply is _cas or t.apply is _cas_indeterminate:
            observed.add(t.arg[0])
    out: list[Transition | None] = []
    for op, t in zip(ops, transitions, strict=True):
        if t is not None and op.type == "info" and t.deadline is None:  # ok ones keep their values
            if t.apply is _write and t.arg not in observed:
                t = _WRITE_UNSEEN
            elif t.apply is _cas_indeterminate and t.arg[1] not in observed:
                t = Transition(t.apply, (t.arg[0], UNSEEN))
        out.append(t)
    return out


def _register_transition(
    model: KeyedModel, op: Operation, read_absent: Any, reads: dict[Any, Transition] | None = None
) -> Transition | None:
    """``op`` as a register transition; ``reads`` shares one transition among the reads of one value."""
    f, kind = op.f, op.type
    if f == "read" or f == "get":
        if kind != "ok":
            return None  # a failed or indeterminate read changed nothing
        output = read_absent if op.output is None else freeze(op.output)
        if reads is None:
            return Transition(_read, output, pure=True, needs=output)
        shared = reads.get(output)
        if shared is None:
            shared = reads[output] = Transition(_read, output, pure=True, needs=output)
        return shared
    if f == "write" or f == "put":
        if kind == "fail":
            return None
        return Transition(_write, freeze(op.value))
    if f == "cas":
        expected, new = _cas_argument(op)
        if kind == "ok":
            return Transition(_cas, (expected, new))
        if kind == "info":
            return Transition(_cas_indeterminate, (expected, new))
        if op.error in CAS_RETURNED_FALSE_ERRORS:
            return Transition(_cas_returned_false, expected, pure=True)
        return None
    raise model._unknown(op)


class KVModel(KeyedModel):
    """A key-value map: one string per key, initially ``""``. ``get``/``read`` return it (a null read
    counts as ``""``, never written), ``put``/``write`` set it, ``append`` concatenates, ``cas`` as the
    compare-and-set register. Porcupine's key-value model, plus the register operations."""

    name = "kv"
    functions = ("get", "put", "append", "read", "write", "cas")

    def init(self) -> Hashable:
        return ""

    def prepare(self, op: Operation) -> Transition | None:
        if op.f == "append":
            if op.type == "fail":
                return None
            if not isinstance(op.value, str):
                raise ModelError(
                    f"operation {op.id} (history line {op.invoke_index + 1}): append value must be a "
                    f"string, not {op.value!r}"
                )
            return Transition(_append, op.value)
        return _register_transition(self, op, read_absent="")


class QueueModel(KeyedModel):
    """A FIFO queue per key. ``put`` enqueues ``{"guid", "value"}``; ``consume`` dequeues the oldest
    message, and an ``ok`` consume reports it (``{"guid", "value"}``) or null when the queue was empty.

    ``confirm`` (BlazingMQ's CONFIRM, seed 004) does not change the order of the queue; whether each
    message is delivered once is the durability checker's question, so it is left out here. So is a
    *redelivery*: an ``ok`` consume whose message carries ``"redelivered": true`` (at-least-once queues
    such as the bundled cluster's deliver a message again when no confirm came within a visibility
    timeout, and say so) took nothing from the queue: the message left it at its first delivery, which
    was an ``ok`` consume without the flag or, if there is none, an ``info`` consume of an anonymous
    message (below).

    The state is ``(messages, enqueued, ahead)``: the messages in the queue, oldest first, and which of
    the consumed messages have been enqueued so far (used by the last reduction below). ``prepare_group``
    reads the whole sub-history first, which allows exact reductions, each of which only ever removes
    states that cannot lead to a linearization:

    * messages that no ``ok`` consume returned are told apart by nothing but their place in the queue,
      so they are all enqueued as one anonymous message (:data:`UNCONSUMED`): orders that differ only in
      where such messages sit become one state;
    * an ``info`` put of such a message is left out: taking effect could only put one more message in
      front of the ones consumes must find (or make the queue non-empty for a consume that found it
      empty), never make a linearization possible;
    * an ``info`` consume may take effect only where the oldest message is an anonymous one: a message
      some ``ok`` consume returned cannot have been taken by another consume before;
    * FIFO against real time: if the consume of ``b`` returned before the consume of ``c`` was invoked,
      ``b`` must be enqueued before ``c``. So a put of ``c`` is refused while such a ``b`` is not yet
      enqueued, and a put of ``b`` is refused behind such a ``c``. Those states could only fail later,
      when the consumes come; without this, checking a queue is exponential in how many messages wait
      in it.
    """

    name = "queue"
    functions = ("put", "consume", "confirm")

    def init(self) -> Hashable:
        return ((), 0, frozenset())

    def prepare_group(self, ops: Sequence[Operation]) -> list[Transition | None]:
        put = {self._message(op, op.value, "put value") for op in ops if op.f == "put" and op.type != "fail"}
        # Messages that an ok consume returned (and some put sent): when that consume was invoked and
        # when it returned, and their ranks in the order of those returns.
        consume_call: dict[Hashable, int] = {}
        consume_ret: dict[Hashable, int] = {}
        for op in ops:
            if (op.f == "consume" and op.type == "ok" and op.output is not None and op.ret is not None
                    and not _redelivery(op)):
                message = self._message(op, op.output, "consume output")
                if message in put:
                    consume_call.setdefault(message, op.call)
                    consume_ret.setdefault(message, op.ret)
        by_return = sorted(consume_ret, key=lambda m: consume_ret[m])
        rank = {message: r for r, message in enumerate(by_return)}
        returns = [consume_ret[m] for m in by_return]

        def enqueue_in_order(state: Any, arg: tuple[Hashable, int, int]) -> Any:
            message, rank_of, before = arg
            messages, enqueued, ahead = state
            if enqueued < before:
                return REJECTED  # a message that must be consumed before this one is not enqueued yet
            returned = returns[rank_of]
            for other in messages:
                if consume_call.get(other, -1) > returned:
                    return REJECTED  # it would be in front of one that must be consumed after it
            if rank_of == enqueued:
                enqueued += 1
                while enqueued in ahead:
                    ahead = ahead - {enqueued}
                    enqueued += 1
            else:
                ahead = ahead | {rank_of}
            return ((*messages, message), enqueued, ahead)

        transitions: list[Transition | None] = []
        for op in ops:
            transition = self.prepare(op)
            if transition is not None and op.f == "put":
                message = transition.arg
                if message not in rank:
                    transition = None if op.type == "info" else Transition(_enqueue, UNCONSUMED)
                else:
                    # Messages whose consume returned before this one's consume was invoked come first.
                    before = bisect.bisect_left(returns, consume_call[message])
                    transition = Transition(enqueue_in_order, (message, rank[message], before))
            elif transition is not None and op.f == "consume" and op.type == "info":
                transition = Transition(_dequeue_unconsumed, None)
            transitions.append(transition)
        return transitions

    def prepare(self, op: Operation) -> Transition | None:
        f, kind = op.f, op.type
        if f == "put":
            if kind == "fail":
                return None
            return Transition(_enqueue, self._message(op, op.value, "put value"))
        if f == "consume":
            if kind == "fail":
                return None
            if kind == "info":
                return Transition(_dequeue_indeterminate, None)
            if op.output is None:
                return Transition(_dequeue_empty, None, pure=True)
            message = self._message(op, op.output, "consume output")
            return None if _redelivery(op) else Transition(_dequeue, message)
        if f == "confirm":
            return None
        raise self._unknown(op)

    @staticmethod
    def _message(op: Operation, value: Any, what: str) -> Hashable:
        if not isinstance(value, dict) or "guid" not in value:
            raise ModelError(
                f"operation {op.id} (history line {op.invoke_index + 1}): {what} must be "
                f'{{"guid": ..., "value": ...}}, not {value!r}'
            )
        return (freeze(value["guid"]), freeze(value.get("value")))

    def describe_state(self, state: Any) -> str:
        return json.dumps(
            [
                "a message no consume returned"
                if message == UNCONSUMED
                else {"guid": thaw(message[0]), "value": thaw(message[1])}
                for message in state[0]
            ]
        )


def _redelivery(op: Operation) -> bool:
    """An ok consume that delivered again a message delivered before (QueueModel)."""
    return isinstance(op.output, dict) and op.output.get("redelivered") is True


# The anonymous message standing for every message that no ok consume returned (QueueModel).
UNCONSUMED: Final = ("\x00unconsumed", None)


# Queue transitions over (messages, enqueued, ahead); see QueueModel.


def _enqueue(state: Any, message: Any) -> Any:
    messages, enqueued, ahead = state
    return ((*messages, message), enqueued, ahead)


def _dequeue(state: Any, message: Any) -> Any:
    messages, enqueued, ahead = state
    if messages and messages[0] == message:
        return (messages[1:], enqueued, ahead)
    return REJECTED


def _dequeue_empty(state: Any, _: Any) -> Any:
    return state if not state[0] else REJECTED


def _dequeue_indeterminate(state: Any, _: Any) -> Any:
    messages, enqueued, ahead = state
    return (messages[1:], enqueued, ahead) if messages else state


def _dequeue_unconsumed(state: Any, _: Any) -> Any:
    messages, enqueued, ahead = state
    if not messages:
        return state
    return (messages[1:], enqueued, ahead) if messages[0] == UNCONSUMED else REJECTED


# -- Knossos' other models: mutex, set, multi-register, FIFO and unordered queues of plain values ------


class MutexModel(KeyedModel):
    """A lock per key, initially free (Knossos' ``mutex``): ``acquire`` takes a free lock, ``release``
    frees a held one. Which process holds it is not tracked (Knossos does not either). A ``fail``
    acquire or release did nothing; an ``info`` one may have taken effect (where it could) or not."""

    name = "mutex"
    functions = ("acquire", "release")

    def init(self) -> Hashable:
        return False

    def prepare(self, op: Operation) -> Transition | None:
        if op.f not in self.functions:
            raise self._unknown(op)
        if op.type == "fail":
            return None
        return _ACQUIRE if op.f == "acquire" else _RELEASE

    def describe_state(self, state: Any) -> str:
        return "held" if state else "free"


def _acquire(state: Any, _: Any) -> Any:
    return REJECTED if state else True


def _release(state: Any, _: Any) -> Any:
    return False if state else REJECTED


_ACQUIRE: Final = Transition(_acquire, None)
_RELEASE: Final = Transition(_release, None)


class SetModel(KeyedModel):
    """A set per key, initially empty (Knossos' ``set``): ``add`` puts its value in, an ``ok`` ``read``
    returns every element (a JSON list, in any order). Elements compare as JSON values."""

    name = "set"
    functions = ("add", "read")

    def init(self) -> Hashable:
        return frozenset()

    def prepare(self, op: Operation) -> Transition | None:
        if op.f not in self.functions:
            raise self._unknown(op)
        if op.type == "fail":
            return None
        if op.f == "add":
            return Transition(_add, freeze(op.value))
        if op.type != "ok":
            return None  # an indeterminate read changed nothing
        if not isinstance(op.output, list):
            raise ModelError(
                f"operation {op.id} (history line {op.invoke_index + 1}): a set read returns a list of "
                f"elements, not {op.output!r}"
            )
        elements = frozenset(freeze(v) for v in op.output)
        return Transition(_read, elements, pure=True, needs=elements)

    def describe_state(self, state: Any) -> str:
        return _json(sorted((thaw(v) for v in state), key=lambda v: json.dumps(v, sort_keys=True)))


def _add(state: Any, element: Any) -> Any:
    return state if element in state else state | {element}


# Micro-operation names of a txn: Knossos writes :read/:write, Elle and newer Jepsen tests :r/:w.
_MICRO_READS: Final = frozenset({"read", "r"})
_MICRO_WRITES: Final = frozenset({"write", "w"})


class MultiRegisterModel(KeyedModel):
    """Registers read and written together by transactions (Knossos' ``multi-register``): ``f`` is
    ``txn`` and the value a list of micro-operations ``[f, register, value]``, ``f`` ``read``/``r`` or
    ``write``/``w``, applied atomically in order. The invoke holds the intended operations (reads with
    null values), an ``ok`` completion the same with what each read returned. Registers start at null
    unless ``initial`` (an object register -> value) says otherwise; Knossos' tests use
    ``{"x": 0, "y": 0}``. An ``info`` txn may have applied its writes (its reads are unknown).
    One object per ``key`` (usually null: the whole history is one object)."""

    name = "multi-register"
    functions = ("txn",)

    def __init__(self, initial: Any = None, semantics: str = "strict") -> None:
        super().__init__(semantics)
        if initial is not None and not isinstance(initial, dict):
            raise ModelError(f"a multi-register's initial value is an object register -> value, not {initial!r}")
        self.initial = tuple(sorted(((freeze(k), freeze(v)) for k, v in (initial or {}).items()), key=_register_order))

    def init(self) -> Hashable:
        return self.initial

    def prepare(self, op: Operation) -> Transition | None:
        if op.f not in self.functions:
            raise self._unknown(op)
        if op.type == "fail":
            return None
        micro = self._micro_ops(op, op.output if op.type == "ok" and op.output is not None else op.value)
        if self.knossos:
            micro = tuple(m for m in micro if m[0] or m[2] is not None)  # Knossos: a nil read is always legal
            if not micro:
                return None
        if op.type != "ok":
            micro = tuple(m for m in micro if m[0])  # only the writes of an indeterminate txn matter
            if not micro:
                return None
        pure = not any(m[0] for m in micro)
        return Transition(_txn, micro, pure=pure)

    def _micro_ops(self, op: Operation, value: Any) -> tuple[tuple[bool, Any, Any], ...]:
        if not isinstance(value, list):
            raise ModelError(
                f"operation {op.id} (history line {op.invoke_index + 1}): a txn value is a list of "
                f"[f, register, value] micro-operations, not {value!r}"
            )
        out = []
        for m in value:
            if not (isinstance(m, list) and len(m) == 3 and m[0] in _MICRO_READS | _MICRO_WRITES):
                raise ModelError(
                    f"operation {op.id} (history line {op.invoke_index + 1}): a micro-operation is "
                    f"[read|write|r|w, register, value], not {m!r}"
                )
            out.append((m[0] in _MICRO_WRITES, freeze(m[1]), freeze(m[2])))
        return tuple(out)

    def describe_state(self, state: Any) -> str:
        return _json({str(thaw(k)): thaw(v) for k, v in state})

    def describe_operation(self, op: Operation) -> str:
        shown = op.output if op.type == "ok" and op.output is not None else op.value
        text = f"p{op.process} txn {json.dumps(shown, sort_keys=True)}"
        return text if op.type == "ok" else text + f" ({op.type}: {op.error or 'indeterminate'})"


def _txn(state: Any, micro: tuple[tuple[bool, Any, Any], ...]) -> Any:
    registers = dict(state)
    for write, register, value in micro:
        if write:
            registers[register] = value
        elif registers.get(register) != value:
            return REJECTED
    changed = tuple(sorted(registers.items(), key=_register_order))
    return state if changed == state else changed


def _register_order(item: tuple[Any, Any]) -> str:
    return json.dumps(thaw(item[0]), sort_keys=True)


class FifoQueueModel(KeyedModel):
    """A FIFO queue of plain values per key (Knossos' ``fifo-queue``): ``enqueue`` a value, ``dequeue``
    the oldest; an ``ok`` dequeue returns it, or null when it found the queue empty (Jepsen clients
    more often record that as ``fail``, which did nothing). Values need not be unique. An ``info``
    dequeue may have taken the oldest value. (For messages with GUIDs, see ``queue``.)"""

    name = "fifo-queue"
    functions = ("enqueue", "dequeue")

    def init(self) -> Hashable:
        return ()

    def prepare(self, op: Operation) -> Transition | None:
        if op.f not in self.functions:
            raise self._unknown(op)
        if op.type == "fail":
            return None
        if op.f == "enqueue":
            return Transition(_fifo_enqueue, freeze(op.value))
        if op.type != "ok":
            return Transition(_fifo_dequeue_any, None)
        if op.output is None:
            return Transition(_empty, None, pure=True, needs=())
        return Transition(_fifo_dequeue, freeze(op.output))

    def prepare_group(self, ops: Sequence[Operation]) -> list[Transition | None]:
        return _drop_unreturned_info_enqueues(ops, [self.prepare(op) for op in ops])

    def describe_state(self, state: Any) -> str:
        return _json([thaw(v) for v in state])


def _drop_unreturned_info_enqueues(
    ops: Sequence[Operation], transitions: list[Transition | None]
) -> list[Transition | None]:
    """An ``info`` enqueue of a value no ``ok`` dequeue returned is left out (exact): taking effect
    could only put one more value in front of those dequeues must find (or in a queue a dequeue found
    empty), and an ``info`` dequeue that took it could as well never have happened."""
    returned = {freeze(op.output) for op in ops if op.f == "dequeue" and op.type == "ok"}
    return [
        None if t is not None and op.type == "info" and op.f == "enqueue" and t.arg not in returned else t
        for op, t in zip(ops, transitions, strict=True)
    ]


def _fifo_enqueue(state: Any, value: Any) -> Any:
    return (*state, value)


def _fifo_dequeue(state: Any, value: Any) -> Any:
    return state[1:] if state and state[0] == value else REJECTED


def _fifo_dequeue_any(state: Any, _: Any) -> Any:
    return state[1:] if state else state


def _empty(state: Any, _: Any) -> Any:
    return REJECTED if state else state


class UnorderedQueueModel(KeyedModel):
    """A queue that delivers its values in any order (Knossos' ``unordered-queue``), per key: a multiset.
    ``enqueue`` adds a value; an ``ok`` ``dequeue`` removes the value it returns (null: it found the
    queue empty). An ``info`` dequeue may have removed any one value: the model is nondeterministic,
    and the checker searches over sets of states."""

    name = "unordered-queue"
    functions = ("enqueue", "dequeue")
    nondeterministic = True

    def init(self) -> Hashable:
        return ()

    def prepare(self, op: Operation) -> Transition | None:
        if op.f not in self.functions:
            raise self._unknown(op)
        if op.type == "fail":
            return None
        if op.f == "enqueue":
            return Transition(_bag_add, freeze(op.value))
        if op.type != "ok":
            return Transition(_bag_take_any, None)
        if op.output is None:
            return Transition(_bag_empty, None)
        return Transition(_bag_take, freeze(op.output))

    def prepare_group(self, ops: Sequence[Operation]) -> list[Transition | None]:
        return _drop_unreturned_info_enqueues(ops, [self.prepare(op) for op in ops])

    def step(self, state: Hashable, op: Operation) -> tuple[bool, Any]:
        transition = self.prepare(op)
        if transition is None:
            return True, state
        reached = transition.apply(state, transition.arg)
        return bool(reached), (next(iter(reached)) if len(reached) == 1 else reached)

    def describe_state(self, state: Any) -> str:
        if isinstance(state, frozenset):
            return " or ".join(sorted(self.describe_state(s) for s in state))
        return _json([thaw(v) for v in state])


# The unordered queue's states are sorted tuples of values (a multiset); its transitions return the
# frozenset of states they may lead to (empty: rejected).


def _bag_add(state: Any, value: Any) -> frozenset[Any]:
    return frozenset({tuple(sorted((*state, value), key=repr))})


def _bag_take(state: Any, value: Any) -> frozenset[Any]:
    if value not in state:
        return frozenset()
    items = list(state)
    items.remove(value)
    return frozenset({tuple(items)})


def _bag_take_any(state: Any, _: Any) -> frozenset[Any]:
    if not state:
        return frozenset({state})
    return frozenset(state[:i] + state[i + 1 :] for i in range(len(state)))


def _bag_empty(state: Any, _: Any) -> frozenset[Any]:
    return frozenset() if state else frozenset({state})


MODELS: Final[dict[str, Callable[..., Model]]] = {
    "register": lambda: RegisterModel(cas=False),
    "cas-register": lambda: RegisterModel(cas=True),
    "kv": KVModel,
    "queue": QueueModel,
    "mutex": MutexModel,
    "set": SetModel,
    "multi-register": MultiRegisterModel,
    "fifo-queue": FifoQueueModel,
    "unordered-queue": UnorderedQueueModel,
}


SEMANTICS: Final = ("strict", "knossos")
"""How a history is read (module docstring): FORMATS.md's (``strict``), or Knossos' (``knossos``)."""
_SEMANTIC_MODELS: Final = frozenset({"register", "cas-register", "multi-register"})
"""The models whose reading of a history the semantics change; the others read it as Knossos does."""


def _semantics(name: str) -> str:
    if name not in SEMANTICS:
        raise ModelError(f"unknown semantics {name!r}; choose one of {', '.join(SEMANTICS)}")
    return name


def models_with(f: str) -> list[str]:
    """The names of the models that have the operation ``f``."""
    return [name for name, factory in MODELS.items() if f in factory().functions]


def get_model(name: str, *, initial: Any = None, semantics: str = "strict") -> Model:
    """The model called ``name`` (one of :data:`MODELS`); ``initial`` is the registers' value before any
    write (``register``, ``cas-register``; ``multi-register``: an object register -> value). Knossos'
    tests start their registers at 0. ``semantics`` is one of :data:`SEMANTICS`."""
    try:
        factory = MODELS[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None
    if initial is not None and name not in _SEMANTIC_MODELS:
        raise ModelError(f"an initial value applies to the register models and multi-register, not {name!r}")
    if name == "multi-register":
        model: Any = MultiRegisterModel(initial, semantics)
    elif name in _SEMANTIC_MODELS:
        model = RegisterModel(cas=name == "cas-register", initial=initial, semantics=semantics)
    else:
        model = factory(semantics=semantics)
    return model  # type: ignore[no-any-return]
