"""The linearizability checker: is there one order of the operations, consistent with real time, that the
model (``checkers.models``) accepts?

The search is Wing & Gong's, with Lowe's memoisation, as Porcupine implements it (Lowe, "Testing for
linearizability", 2017; Horn & Kroening, "Faster linearizability checking via P-compositionality", 2015):

* **P-compositionality.** Each object (register key, queue) is checked on its own; the history is
  linearizable iff every object's sub-history is. The objects' searches are interleaved in slices (one
  core's version of Porcupine's parallel search): the first object found not linearizable decides the
  verdict, however long the others would have taken.
* **Entries.** Each operation contributes a call entry at its invoke time and a return entry at its
  completion time, in one time-ordered list. Intervals are closed: at equal times calls come first, so an
  operation invoked at the instant another returned counts as concurrent with it (never a false alarm).
  The operations that may be linearized next are the calls before the first return entry still listed.
* **Search.** Take such a call, apply it to the model, lift its two entries out of the list and start
  again from the head; at a return entry, nothing before it can be linearized any more, so undo the last
  choice (a stack of lifted entries, re-linked in LIFO order) and try the next call.
* **Memo.** A (set of linearized operations, model state) pair already explored is never explored again
  (the state is hashable; the set is kept as the XOR of a random 128-bit key per operation, Zobrist's
  hashing, updated in O(1) per step where a bitset costs O(n): two different sets share a key with
  probability 2^-128 per pair, far below any other cause of a wrong verdict).

Refinements, each exact (they never change a verdict):

* **Indeterminate (``info``) operations** have no return entry: they may take effect at any time after
  their invoke or never, and "never" is the same as "after all other operations", so the search succeeds
  as soon as every ``ok``/``fail`` operation is linearized. (Dropping ``info`` writes, or ending them at
  their ``info`` line, wrongly rejects 20 of the 23 linearizable etcd logs of the Porcupine corpus.) For
  the same reason an ``info`` operation is left out when it was invoked after the last completion or
  cannot change the state, and is not linearized at a point where it would not change the state (it
  stays pending, which can do everything that could). Identical ``info`` operations (same transition)
  are interchangeable: of those not yet linearized, only the earliest invoked is a candidate.
* **Pure operations first.** An operation whose transition never changes the state (an ``ok`` read, a
  cas that returned false, an empty consume) is linearized as soon as real time allows it and the state
  accepts it, with no alternative tried: moving such an operation earlier keeps any linearization valid.
* **Models see the whole sub-history** (``prepare_group``) and may refuse steps that could only fail
  later; the queue model does (``checkers.models.QueueModel``).
* **Refutation by real time, only where needed.** A model may refute an object by real time alone
  (``refute``: the register models' stale-read rule), which decides at once what the search could need
  exponential time to exhaust. It only ever proves a violation, so each object's search is first tried
  for a few slices (four steps per operation): one that finds a linearization there needs no refutation
  (a big valid history's keys, each saving a pass as long as the search); otherwise the trial is
  dropped, and the refutation and the search run as if it had not. (With a memory budget, an object
  decided in its trial is never given up, where searched together with the others it could have been.)

Budgets: a deadline (``timeout_s``, on a clock passed in) and a bound on memo entries (``max_states``,
summed over the objects being searched) end the search with ``unknown`` and the longest partial
linearization found, never an out-of-memory crash. Over the memory budget, the object with the largest
memo is given up first, so the others may still find a violation.

When no linearization exists, the counterexample names the first point where every partial
linearization stops: the earliest completion such that no order of the operations completed by then is
valid. It holds the operation completing there, the window of operations concurrent with it (times,
process, node, values, whether and where each was linearized), and the linearization that got there,
with the model state after each operation: what a Porcupine-style diagram draws.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
from collections.abc import Callable, Generator, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from checkers.history import Operation, seconds
from checkers.models import ANY_STATE, REJECTED, Model, Transition, get_model, thaw
from checkers.verdict import UNKNOWN, Valid, Verdict

NAME: Final = "linearizable"
DEFAULT_MAX_STATES: Final = 2_000_000  # memo entries held at once, over all objects
DEFAULT_MAX_MEMORY_BYTES: Final = 1 << 30  # estimated size of those entries, states included
_ENTRY_BYTES: Final = 130  # a memo entry without its state: set slot, pair, 128-bit key
SLICE: Final = 1024  # search steps one object's search takes before the next object's turn
_ZOBRIST_SEED: Final = 0x11EA  # fixed: the same history always gets the same search and verdict


@dataclass
class _Outcome:
    """How the search over one object ended."""

    valid: Valid
    reason: str = ""
    states: int = 0  # memo entries
    linearization: list[tuple[int, Any]] = field(default_factory=list)  # (op index, state after it)
    blocked: int | None = None  # the op whose completion no linearization got past


class _GiveUp(Exception):
    """Thrown into a search to end it with ``unknown``."""


_Search = Generator[tuple[int, int], None, _Outcome]  # yields (memo entries, their estimated bytes)


def _search(ops: Sequence[Operation], transitions: Sequence[Transition], init: Hashable) -> _Search:
    """Wing & Gong / Lowe search over one object's operations (module docstring).

    A generator: every :data:`SLICE` steps it yields its number of memo entries and their estimated size
    in bytes (sampling the current state's size); it returns an ``_Outcome``.
    Throwing ``_GiveUp(reason)`` in ends it with ``unknown`` and its longest partial linearization.
    """
    n = len(ops)
    if len(transitions) != n:
        raise ValueError(f"{n} operations but {len(transitions)} transitions")
    rets = [op.ret for op in ops]
    info = [r is None for r in rets]
    if True in info:  # an info op the model gave a deadline has that as its return
        rets = [r if r is not None else t.deadline for r, t in zip(rets, transitions, strict=True)]
        info = [r is None for r in rets]
    pure = [t.pure for t in transitions]
    apply = [t.apply for t in transitions]
    arg = [t.arg for t in transitions]
    needs = [t.needs for t in transitions]
    calls = [op.call for op in ops]
    zobrist = _zobrist_keys(n)
    m, nxt, prv, opi, return_of, call_entry, twin_after, needed, open_ended = _entries(
        calls, rets, info, pure, apply, arg, needs
    )
    # (the entries' lists: heads m + 1 .. m + 4, tails m + 5 .. m + 8, as _entries says)
    pure_head, call_head, info_head, return_head = m + 1, m + 2, m + 3, m + 4
    pure_tail = m + 6
    remaining = n - info.count(True)
    if remaining == 0:
        return _Outcome(True)

    cache: set[tuple[int, Any]] = set()
    explored = 0  # len(cache), kept by hand: one len() per step tells a new entry from a known one
    # The stack of lifted call entries, as linked tuples (entry, state and set before it, rest): a
    # snapshot of the longest linearization is a reference, not a copy.
    stack: Any = None
    depth = 0
    state: Any = init
    bits = 0  # Zobrist key of the set of linearized ops
    ticks = SLICE
    best_entry = -1
    best_stack: Any = None
    best_depth = 0
    best_state: Any = init
    close = True  # at a new configuration: first linearize every pure op it allows
    first_return = nxt[return_head]
    e = 0
    scanning_info = False  # the scan goes through the ok/fail calls, then the info calls

    while True:
        ticks -= 1
        if not ticks:
            # Every SLICE steps (whether or not they found new states) the caller gets its turn: to look at
            # the clock and the memory budget, or to run another object's search.
            ticks = SLICE
            try:
                yield explored, explored * (_ENTRY_BYTES + sys.getsizeof(state))
            except _GiveUp as give_up:
                if depth > best_depth:
                    best_stack, best_state = stack, state
                return _Outcome(
                    UNKNOWN,
                    str(give_up),
                    states=len(cache),
                    linearization=_linearization(best_stack, best_state, opi),
                )
        if close:
            close = False
            first_return = nxt[return_head]
            c = nxt[pure_head] if open_ended or needed.get(state) else pure_tail
            e = nxt[call_head]
            scanning_info = False
            taken = False
            while c < first_return:
                i = opi[c]
                if apply[i](state, arg[i]) is not state:
                    c = nxt[c]
                    continue
                taken = True
                stack = (c, state, bits, stack)
                depth += 1
                bits ^= zobrist[i]
                if needs[i] is ANY_STATE:
                    open_ended -= 1
                else:
                    needed[state] -= 1
                before = prv[c]
                q = nxt[c]
                nxt[before] = q
                prv[q] = before
                r = return_of[c]
                p = prv[r]
                q = nxt[r]
                nxt[p] = q
                prv[q] = p
                remaining -= 1
                if remaining == 0:
                    return _Outcome(True, states=len(cache))
                first_return = nxt[return_head]
                c = nxt[before]
            if taken:
                # The closure is a function of the configuration it starts from, so only its end needs
                # the memo: a path reaching any configuration within it ends at the same place.
                cache.add((bits, state))
                if len(cache) == explored:
                    e = -1  # explored before, from another path, without success
                else:
                    explored += 1
        if e >= 0:
            if e < first_return:
                i = opi[e]
                new = apply[i](state, arg[i])
                if new is REJECTED or (scanning_info and new == state):
                    # (an info op with no effect now: staying pending, maybe "never", dominates)
                    e = nxt[e]
                    continue
                nb = bits ^ zobrist[i]
                cache.add((nb, new))
                if len(cache) == explored:
                    e = nxt[e]
                    continue
                explored += 1
                stack = (e, state, bits, stack)
                depth += 1
                bits = nb
                state = new
                p = prv[e]
                q = nxt[e]
                nxt[p] = q
                prv[q] = p
                r = return_of[e]
                if r:
                    p = prv[r]
                    q = nxt[r]
                    nxt[p] = q
                    prv[q] = p
                    remaining -= 1
                    if remaining == 0:
                        return _Outcome(True, states=len(cache))
                else:
                    j = twin_after[i]
                    if j >= 0:  # list the next twin, in entry order
                        t = call_entry[j]
                        while q < t:
                            p = q
                            q = nxt[q]
                        nxt[p] = t
                        prv[t] = p
                        nxt[t] = q
                        prv[q] = t
                close = True
                continue
            if not scanning_info:
                scanning_info = True
                e = nxt[info_head]
                continue
            # Every call before the first return has been tried: no choice made so far gets past it.
            if first_return > best_entry:
                best_entry, best_stack, best_state, best_depth = first_return, stack, state, depth
        # Backtrack: undo the forced (pure) lifts, then the last choice, and try the call after it.
        while True:
            if stack is None:
                return _Outcome(
                    False,
                    states=len(cache),
                    linearization=_linearization(best_stack, best_state, opi),
                    blocked=opi[best_entry] if best_entry > 0 else None,
                )
            e, state, bits, stack = stack
            depth -= 1
            i = opi[e]
            r = return_of[e]
            if r:
                nxt[prv[r]] = r
                prv[nxt[r]] = r
                remaining += 1
            else:
                j = twin_after[i]
                if j >= 0:
                    t = call_entry[j]
                    nxt[prv[t]] = nxt[t]
                    prv[nxt[t]] = prv[t]
            nxt[prv[e]] = e
            prv[nxt[e]] = e
            if not pure[i]:
                break
            if needs[i] is ANY_STATE:
                open_ended += 1
            else:
                needed[state] += 1
        scanning_info = info[i]
        e = nxt[e]
        first_return = nxt[return_head]


_Entries = tuple[int, list[int], list[int], list[int], list[int], list[int], list[int], dict[Any, int], int]


def _entries(
    calls: list[int],
    rets: list[int | None],
    info: list[bool],
    pure: list[bool],
    apply: list[Any],
    arg: list[Any],
    needs: list[Any],
) -> _Entries:
    """The search's entries (:func:`_search`): their number ``m``; the links ``nxt`` and ``prv``, the op
    of each entry, each call entry's return entry, each op's call entry, each info op's next twin; how
    many pure ops need each state, and how many accept any."""
    n = len(calls)
    # Events in time order, each one int: (time * 2 + kind) * n + op, kind 0 = call, 1 = return (at
    # equal times calls first). Info ops have no return entry.
    if True in info:
        last_return = max([r for r in rets if r is not None], default=None)
        # "never" is always possible for an info op invoked after the last completion, and it is as good
        # as any other point for one that cannot change the state.
        events = [
            c * 2 * n + i
            for i, c in enumerate(calls)
            if not info[i] or not (pure[i] or last_return is None or c > last_return)
        ]
        events += [(r * 2 + 1) * n + i for i, r in enumerate(rets) if r is not None]
    else:
        events = [c * 2 * n + i for i, c in enumerate(calls)]
        events += [(r * 2 + 1) * n + i for i, r in enumerate(rets)]
    events.sort()
    m = len(events)

    # Entries 1..m are numbered in time order and sit in doubly linked lists: the calls of pure ops, of
    # the other ok/fail ops, of info ops, and the returns. The ops that may be linearized next are the
    # calls numbered below the first listed return. Every head is numbered below every tail and every
    # tail above every entry, the return tail lowest of them.
    pure_head, call_head, info_head, return_head = m + 1, m + 2, m + 3, m + 4
    return_tail, pure_tail, call_tail, info_tail = m + 5, m + 6, m + 7, m + 8
    size = m + 9
    nxt = [0] * size
    prv = [0] * size
    opi = [0] * size
    return_of = [0] * size  # call entry -> its return entry; 0 for an info op
    call_entry = [0] * n
    # Identical info ops are interchangeable, so of those not yet linearized only the earliest invoked
    # may take effect next: the info list holds just that one of each kind, and twin_after[i] is the
    # one that takes i's place when i is linearized (or -1).
    twin_after = [-1] * n
    latest_twin: dict[tuple[Any, Any], int] = {}
    # How many unlinearized pure ops need each state, and how many accept more than one state: a state
    # no unlinearized pure op can accept needs no closure pass.
    needed: dict[Any, int] = {}
    open_ended = 0
    last_pure, last_call, last_info, last_return_entry = pure_head, call_head, info_head, return_head
    for e, code in enumerate(events, start=1):
        q, i = divmod(code, n)
        opi[e] = i
        if q & 1:
            return_of[call_entry[i]] = e
            nxt[last_return_entry] = e
            prv[e] = last_return_entry
            last_return_entry = e
            continue
        call_entry[i] = e
        if pure[i]:
            want = needs[i]
            if want is ANY_STATE:
                open_ended += 1
            else:
                needed[want] = needed.get(want, 0) + 1
            nxt[last_pure] = e
            prv[e] = last_pure
            last_pure = e
        elif not info[i]:
            nxt[last_call] = e
            prv[e] = last_call
            last_call = e
        else:
            signature = (apply[i], arg[i])
            earlier = latest_twin.get(signature)
            latest_twin[signature] = i
            if earlier is not None:
                twin_after[earlier] = i
                continue  # listed when its earlier twin is linearized
            nxt[last_info] = e
            prv[e] = last_info
            last_info = e
    for last, tail in (
        (last_pure, pure_tail),
        (last_call, call_tail),
        (last_info, info_tail),
        (last_return_entry, return_tail),
    ):
        nxt[last] = tail
        prv[tail] = last
    return m, nxt, prv, opi, return_of, call_entry, twin_after, needed, open_ended


_ZOBRIST: list[int] = []


def _zobrist_keys(n: int) -> list[int]:
    """At least ``n`` random 128-bit keys, op ``i`` of every object getting the ``i``-th: always the same
    ones (a fixed seed), made once per process and shared by the objects' searches."""
    if len(_ZOBRIST) < n:
        salt = random.Random(_ZOBRIST_SEED)
        _ZOBRIST[:] = [salt.getrandbits(128) for _ in range(max(n, 2 * len(_ZOBRIST), 1024))]
    return _ZOBRIST


def _linearization(stack: Any, final: Any, opi: list[int]) -> list[tuple[int, Any]]:
    """The ops of a linked stack, first lifted first, each with the state after it."""
    steps: list[tuple[int, Any]] = []
    after = final
    while stack is not None:
        entry, before, _, stack = stack
        steps.append((opi[entry], after))
        after = before
    steps.reverse()
    return steps


def _powerset(transition: Transition) -> Transition:
    """A nondeterministic transition lifted to sets of states (Porcupine's NondeterministicModel)."""
    apply, arg = transition.apply, transition.arg

    def step(states: frozenset[Any], _: Any) -> Any:
        reached: set[Any] = set()
        for state in states:
            reached.update(apply(state, arg))
        return frozenset(reached) if reached else REJECTED

    return Transition(step, None, pure=False)


@dataclass
class _Object:
    """One object's sub-history and its search."""

    key: Hashable
    ops: list[Operation]  # those that may have happened, in invoke order
    transitions: list[Transition]  # what each does (checkers.models)
    search: _Search
    position: int = 0  # in key order: how shards and worker results refer to it
    states: int = 0
    bytes: int = 0
    outcome: _Outcome | None = None


def check_linearizability(
    ops: Iterable[Operation],
    model: Model | str,
    *,
    timeout_s: float | None = None,
    max_states: int | None = None,
    max_memory_bytes: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
) -> Verdict:
    """Check that ``ops`` (a history's client operations) are linearizable with respect to ``model``.

    ``timeout_s`` bounds the whole check (on ``clock``), and ``deadline`` (on the same clock) is an
    absolute end the caller already set (the earlier of the two holds); ``max_states`` and
    ``max_memory_bytes`` bound the memo held at once (defaults :data:`DEFAULT_MAX_STATES`,
    :data:`DEFAULT_MAX_MEMORY_BYTES`). An object whose search reaches a budget is ``unknown``, named with
    the budget, while the others are still decided; the longest partial linearization is kept. An empty
    history is ``unknown``: there is nothing to judge. Raises ``ModelError`` for an operation the model
    cannot read. (Several processes, each with a share of the objects: ``checkers.judge``, with
    :func:`check_shard` and :func:`merge`.)
    """
    if isinstance(model, str):
        model = get_model(model)
    started = clock()
    if timeout_s is not None:
        deadline = started + timeout_s if deadline is None else min(deadline, started + timeout_s)
    budget = make_budget(max_states, max_memory_bytes, timeout_s)
    result = check_shard(ops, model, budget, deadline=deadline, clock=clock)
    return merge([result], model, time_s=clock() - started)


@dataclass
class ShardResult:
    """What the search over some of a history's objects found, in a form that crosses processes: the
    violation (a finished verdict) if any, the objects that ran out of budget, and counts."""

    violation: Verdict | None = None
    unknown_keys: list[dict[str, Any]] = field(default_factory=list)
    ops: int = 0
    keys: int = 0
    info_ops: int = 0
    states: int = 0
    error: str | None = None  # the shard could not be checked at all (a worker that failed)


def make_budget(max_states: int | None, max_memory_bytes: int | None, timeout_s: float | None) -> _Budget:
    """The search's budgets, with the defaults filled in."""
    return _Budget(
        DEFAULT_MAX_STATES if max_states is None else max_states,
        DEFAULT_MAX_MEMORY_BYTES if max_memory_bytes is None else max_memory_bytes,
        timeout_s,
    )


def check_shard(
    ops: Iterable[Operation],
    model: Model,
    budget: _Budget,
    *,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    stop: Callable[[], str | None] | None = None,
) -> ShardResult:
    """Search the objects of ``ops`` (one shard of a history, or all of it) within ``budget``;
    ``stop`` is asked between rounds and gives up the searches when it returns a reason."""
    ops = ops if isinstance(ops, list | tuple) else list(ops)
    collecting = gc.isenabled()
    gc.disable()  # the searches allocate many long-lived objects; the cyclic collector only rescans them
    try:
        objects, unprepared = _objects(ops, model, deadline, clock)
        violation = _run(objects, budget, deadline, clock, stop)
    finally:
        if collecting:
            gc.enable()
    result = ShardResult(
        ops=len(ops),
        keys=len(objects) + len(unprepared),
        info_ops=sum(1 for op in ops if op.type == "info"),
        states=sum(o.states for o in objects),
    )
    if violation is not None:
        result.violation = _violation(model, violation, {})
        return result
    result.unknown_keys = [
        {
            "key": thaw(o.key),
            "reason": o.outcome.reason,
            "ops": len(o.ops),
            "states": o.states,
            "longest_linearization": _steps(model, o),
        }
        for o in objects
        if o.outcome is not None and o.outcome.valid == UNKNOWN
    ]
    reason = budget.timed_out()
    result.unknown_keys += [{"key": thaw(key), "reason": reason, "ops": n, "states": 0} for key, n in unprepared]
    return result


def merge(results: Sequence[ShardResult], model: Model, *, time_s: float, workers: int = 1) -> Verdict:
    """One verdict from the shards' results: a violation if any shard found one (the first shard's
    first), else unknown if any object ran out of budget (or a shard failed), else linearizable."""
    stats: dict[str, Any] = {
        "ops": sum(r.ops for r in results),
        "keys": sum(r.keys for r in results),
        "info_ops": sum(r.info_ops for r in results),
        "states": sum(r.states for r in results),
        "time_s": round(time_s, 6),
    }
    if workers > 1:
        stats["workers"] = workers
    for result in results:
        if result.violation is not None:
            return Verdict(False, result.violation.summary, result.violation.counterexample, stats)
    if stats["ops"] == 0 and not any(r.error for r in results):
        if model.semantics == "knossos":
            return Verdict(
                valid=True,
                summary="linearizable: the history has no client operations, which Knossos (and Porcupine) "
                "call valid, as --semantics knossos asks (the strict semantics call it unknown, nothing to judge)",
                stats=stats,
            )
        return Verdict(
            valid=UNKNOWN,
            summary="linearizability cannot decide: the history has no client operations (nothing to judge; "
            "Knossos and Porcupine call such a history valid, this checker calls it unknown so that a run "
            "whose clients did nothing never passes)",
            stats=stats,
        )
    failed = [r.error for r in results if r.error]
    if failed:
        return Verdict(UNKNOWN, f"linearizability could not decide: {failed[0]}", stats=stats)
    unknown_keys = [entry for r in results for entry in r.unknown_keys]
    if unknown_keys:
        first = unknown_keys[0]
        total = stats["keys"]
        decided = total - len(unknown_keys)
        return Verdict(
            valid=UNKNOWN,
            summary=(
                f"linearizability unknown: {first['reason']} on {len(unknown_keys)} of {total} keys, first key "
                f"{json.dumps(first['key'])} after {first['states']} states (longest partial linearization: "
                f"{len(first.get('longest_linearization', []))} of {first['ops']} operations)"
                + (f"; the other {decided} keys are linearizable" if decided else "")
            ),
            counterexample={"unknown_keys": unknown_keys},
            stats=stats,
        )
    return Verdict(
        valid=True,
        summary=f"linearizable: {stats['ops']} operations on {stats['keys']} keys ({model.name} model)",
        stats=stats,
    )


def _objects(
    ops: Sequence[Operation], model: Model, deadline: float | None, clock: Callable[[], float]
) -> tuple[list[_Object], list[tuple[Hashable, int]]]:
    """Each object's prepared operations and search; once the deadline passes, the objects not prepared
    yet are returned apart, as (key, operations), to be reported unknown."""
    objects: list[_Object] = []
    unprepared: list[tuple[Hashable, int]] = []
    for key, group in model.partition(ops).items():
        if unprepared or (deadline is not None and clock() > deadline):
            unprepared.append((key, len(group)))
            continue
        transitions = model.prepare_group(group)
        if None in transitions:
            kept = [(op, t) for op, t in zip(group, transitions, strict=True) if t is not None]
            group = [op for op, _ in kept]
            transitions = [t for _, t in kept]
        init: Hashable = model.init()
        if model.nondeterministic:
            transitions = [_powerset(t) for t in transitions]
            init = frozenset({init})
        search = _search(group, transitions, init)  # type: ignore[arg-type]
        refute = getattr(model, "refute", None)
        if refute is not None:
            # A refutation only ever proves a violation, so an object whose search quickly finds a
            # linearization (most of a valid history's) needs none: the same search, then, as after a
            # refutation that found nothing. Otherwise the trial is dropped and the refutation decides
            # whether to search from the start, as if the trial had never run.
            outcome = _trial(search, max(2, 4 * len(group) // SLICE))
            if outcome is not None and outcome.valid is True:
                search = _finished(outcome)
            else:
                search.close()
                refuted = refute(group, transitions)
                search = _refuted(refuted) if refuted is not None else _search(group, transitions, init)  # type: ignore[arg-type]
        objects.append(_Object(key, group, transitions, search, position=len(objects)))  # type: ignore[arg-type]
    return objects, unprepared


def _trial(search: _Search, slices: int) -> _Outcome | None:
    """Run ``search`` for at most ``slices`` slices (:data:`SLICE` steps each): its outcome, or None
    if it had not ended by then."""
    try:
        for _ in range(slices):
            next(search)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    return None


def _finished(outcome: _Outcome) -> _Search:
    """The "search" of an object whose search already ended (:func:`_trial`)."""
    return outcome
    yield  # a generator, like _search  # pragma: no cover


def _refuted(refutation: tuple[int, list[tuple[int, Any]]]) -> _Search:
    """The "search" of an object the model refuted by real time alone (``Model.refute``): it ends at
    once, blocked at the operation no order can take, after the operations real time put first."""
    blocked, forced = refutation
    return _Outcome(False, linearization=forced, blocked=blocked)
    yield  # a generator, like _search  # pragma: no cover


@dataclass(frozen=True)
class _Budget:
    states: int
    bytes: int
    timeout_s: float | None = None

    def exceeded(self, objects: list[_Object]) -> str | None:
        if sum(o.states for o in objects) > self.states:
            return f"memory budget of {self.states} states reached"
        if sum(o.bytes for o in objects) > self.bytes:
            return f"memory budget of {self.bytes:,} bytes reached"
        return None

    def timed_out(self) -> str:
        if self.timeout_s is None:
            return "time budget ran out"
        return f"time budget of {self.timeout_s:g} s ran out"

    def share(self, parts: int) -> _Budget:
        """One of ``parts`` workers' share: the memo budgets divided, the time the same."""
        return _Budget(max(1, self.states // parts), max(1, self.bytes // parts), self.timeout_s)


def _run(
    objects: list[_Object],
    budget: _Budget,
    deadline: float | None,
    clock: Callable[[], float],
    stop: Callable[[], str | None] | None = None,
) -> _Object | None:
    """Run the objects' searches in turns until one finds a violation (returned) or all have ended.

    The clock is read after every turn, so a deadline is kept to within one turn (:data:`SLICE` steps).
    ``stop`` is asked after every round; a reason from it gives up the searches still running.
    """
    active = list(objects)
    while active:
        still: list[_Object] = []
        for n, obj in enumerate(active):
            try:
                obj.states, obj.bytes = next(obj.search)
                still.append(obj)
            except StopIteration as done:
                obj.outcome = done.value
                obj.states = obj.outcome.states
                if obj.outcome.valid is False:
                    for other in active:
                        if other is not obj and other.outcome is None:
                            other.search.close()
                    return obj
            if deadline is not None and clock() > deadline:
                for other in still + active[n + 1 :]:
                    _give_up(other, budget.timed_out())
                return None
        active = still
        while active and (reason := budget.exceeded(active)) is not None:
            largest = max(active, key=lambda o: (o.bytes, o.states))
            _give_up(largest, reason)
            active.remove(largest)
        if stop is not None and active and (reason := stop()) is not None:
            for obj in active:
                _give_up(obj, reason)
            return None
    return None


def _give_up(obj: _Object, reason: str) -> None:
    try:
        obj.search.throw(_GiveUp(reason))
    except StopIteration as stop:
        obj.outcome = stop.value
        obj.states = obj.outcome.states
    else:  # pragma: no cover - _search always returns when given up
        raise RuntimeError("a linearizability search ignored being given up")


def _steps(model: Model, obj: _Object) -> list[dict[str, Any]]:
    assert obj.outcome is not None
    return [
        {
            "op": obj.ops[i].id,
            "operation": model.describe_operation(obj.ops[i]),
            "state": model.describe_state(after),
        }
        for i, after in obj.outcome.linearization
    ]


def _violation(model: Model, obj: _Object, stats: dict[str, Any]) -> Verdict:
    outcome = obj.outcome
    assert outcome is not None and outcome.blocked is not None
    steps = _steps(model, obj)
    position = {obj.ops[i].id: k for k, (i, _) in enumerate(outcome.linearization)}
    final = outcome.linearization[-1][1] if outcome.linearization else model.init()
    blocked = obj.ops[outcome.blocked]
    # Only ok and fail operations have return entries, and info ones the model gave a deadline.
    blocked_ret = blocked.ret if blocked.ret is not None else obj.transitions[outcome.blocked].deadline
    assert blocked_ret is not None
    window = []
    for op in obj.ops:
        if op.call <= blocked_ret and (op.ret is None or op.ret >= blocked.call):
            entry = op.to_json()
            entry["operation"] = model.describe_operation(op)
            entry["linearized_at"] = position.get(op.id)
            window.append(entry)
    state_text = model.describe_state(final)
    summary = (
        f"not linearizable: key {json.dumps(thaw(obj.key))}: no order of the operations completed by "
        f"{seconds(blocked_ret)} is valid; the longest linearization ({len(steps)} operations, ending in state "
        f"{state_text}) cannot take {model.describe_operation(blocked)} (op {blocked.id})"
    )
    return Verdict(
        valid=False,
        summary=summary,
        counterexample={
            "key": thaw(obj.key),
            "model": model.name,
            "blocked": {**blocked.to_json(), "operation": model.describe_operation(blocked)},
            "state": state_text,
            "window": window,
            "longest_linearization": steps,
        },
        stats=stats,
    )
