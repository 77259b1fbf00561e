"""Network partitions as grudges: pure functions that build, check and read them.

A *grudge* maps a node to the set of nodes whose packets it drops (Jepsen's word). Connectivity is
directional: ``b in grudge[a]`` means messages from ``b`` never reach ``a``; ``a``'s messages may still
reach ``b``. A symmetric grudge (every drop mirrored) is an ordinary partition; an asymmetric one is a
one-way partition. The shell nemesis turns ``grudge[a]`` into ``iptables`` DROP rules on ``a`` for the
source addresses of the nodes in it; the simulator drops the same messages in its network.

Everything here is a pure function of its arguments. Functions that choose nodes at random take a
``random.Random``; node lists given as sets are sorted first, so no result ever depends on the process's
hash seed. Two of the shapes come from the BlazingMQ election article (seed 000): isolating one node
(its term climbs while it is away) and "Leader Ping-Pong" (two nodes that cannot see each other but both
see the rest, :func:`ping_pong`).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

Grudge = dict[str, frozenset[str]]
"""node -> the nodes whose packets it drops. Nodes absent from the mapping drop nothing."""


def ordered(nodes: Iterable[str]) -> list[str]:
    """The nodes as a list in a deterministic order (sets sorted), rejecting duplicates and non-strings.

    Every function here goes through it, so a set of nodes never makes a result depend on hash order."""
    if isinstance(nodes, str):
        raise TypeError(f"expected a collection of node names, not the string {nodes!r}")
    listed = sorted(nodes) if isinstance(nodes, set | frozenset) else list(nodes)
    for node in listed:
        if not isinstance(node, str) or not node:
            raise ValueError(f"node names must be non-empty strings, not {node!r}")
    if len(set(listed)) != len(listed):
        dupes = sorted({n for n in listed if listed.count(n) > 1})
        raise ValueError(f"duplicate node names: {', '.join(dupes)}")
    return listed


def majority(n: int) -> int:
    """The smallest number of nodes that is more than half of ``n``."""
    return n // 2 + 1


def heal(nodes: Iterable[str] = ()) -> Grudge:
    """The grudge of a healed network: every node drops nothing."""
    return {node: frozenset() for node in ordered(nodes)}


def complete(components: Iterable[Iterable[str]]) -> Grudge:
    """A grudge from disjoint components: every node drops every node outside its own component."""
    groups = [ordered(component) for component in components]
    everyone: list[str] = []
    for group in groups:
        everyone.extend(group)
    ordered(everyone)  # rejects a node that appears in two components
    all_nodes = frozenset(everyone)
    grudge: Grudge = {}
    for group in groups:
        outside = all_nodes - frozenset(group)
        for node in group:
            grudge[node] = outside
    return grudge


def bisect(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split into two halves in the given order; the first half is the smaller when ``len`` is odd."""
    listed = ordered(nodes)
    middle = len(listed) // 2
    return listed[:middle], listed[middle:]


def shuffled(nodes: Iterable[str], rng: random.Random) -> list[str]:
    """The nodes in an order drawn from ``rng`` (sorted first when given as a set)."""
    listed = ordered(nodes)
    rng.shuffle(listed)
    return listed


def halves(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Two halves that cannot talk to each other (random halves when ``rng`` is given)."""
    listed = ordered(nodes) if rng is None else shuffled(nodes, rng)
    if len(listed) < 2:
        raise ValueError(f"halves needs at least 2 nodes, got {len(listed)}")
    return complete(bisect(listed))


def isolate(nodes: Sequence[str], node: str) -> Grudge:
    """``node`` alone on one side, everyone else together on the other."""
    listed = ordered(nodes)
    if node not in listed:
        raise ValueError(f"cannot isolate {node!r}: not one of the nodes {', '.join(listed)}")
    return complete([[node], [n for n in listed if n != node]])


def one_way(src: str | Iterable[str], dst: str | Iterable[str]) -> Grudge:
    """Packets from ``src`` to ``dst`` are dropped; packets from ``dst`` to ``src`` still arrive."""
    sources = ordered([src] if isinstance(src, str) else src)
    targets = ordered([dst] if isinstance(dst, str) else dst)
    overlap = sorted(set(sources) & set(targets))
    if overlap:
        raise ValueError(f"one_way: {', '.join(overlap)} cannot be both a source and a destination")
    if not sources or not targets:
        raise ValueError("one_way needs at least one source and one destination node")
    return {node: frozenset(sources) for node in targets}


def ping_pong(a: str, b: str) -> Grudge:
    """``a`` and ``b`` drop each other's packets; both still see every other node.

    The "Leader Ping-Pong" of the BlazingMQ article (seed 000): with ``a`` the leader, ``b`` stops
    hearing heartbeats and, without ElectionScouting, calls elections that the rest keep granting.
    """
    if a == b:
        raise ValueError(f"ping_pong needs two different nodes, got {a!r} twice")
    return {a: frozenset({b}), b: frozenset({a})}


def bridge(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Two sides that cannot see each other, and one bridge node that both sides (and it) see fully.

    The bridge is the middle node of the (shuffled, when ``rng`` is given) order; the first side is the
    nodes before it, the second side those after. Needs at least 3 nodes.
    """
    listed = ordered(nodes) if rng is None else shuffled(nodes, rng)
    if len(listed) < 3:
        raise ValueError(f"bridge needs at least 3 nodes, got {len(listed)}")
    middle = len(listed) // 2
    left, right = listed[:middle], listed[middle + 1 :]
    grudge: Grudge = {listed[middle]: frozenset()}
    for node in left:
        grudge[node] = frozenset(right)
    for node in right:
        grudge[node] = frozenset(left)
    return grudge


def majorities_ring(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Every node sees a majority (itself included), and no two nodes see the same set of nodes.

    The nodes are placed on a ring (shuffled when ``rng`` is given); each sees itself and its ``reach``
    nearest neighbours on either side, where ``2 * reach + 1`` is the smallest odd number at least a
    majority, and drops the rest. Neighbourhoods on a ring are symmetric, so the grudge is a two-way
    partition. Needs at least 4 nodes: with 3 a majority view covers everyone.
    """
    listed = ordered(nodes) if rng is None else shuffled(nodes, rng)
    n = len(listed)
    if n < 4:
        raise ValueError(f"majorities_ring needs at least 4 nodes, got {n}")
    reach = majority(n) // 2
    grudge: Grudge = {}
    for i, node in enumerate(listed):
        seen = {listed[(i + k) % n] for k in range(-reach, reach + 1)}
        grudge[node] = frozenset(listed) - seen
    return grudge


def nodes_of(grudge: Mapping[str, Collection[str]]) -> frozenset[str]:
    """Every node the grudge names, as a dropper or as dropped."""
    named = set(grudge)
    for dropped in grudge.values():
        named.update(dropped)
    return frozenset(named)


def receives(grudge: Mapping[str, Collection[str]], node: str, sender: str) -> bool:
    """Whether packets from ``sender`` reach ``node`` under the grudge."""
    return sender not in grudge.get(node, ())


def view(grudge: Mapping[str, Collection[str]], node: str, nodes: Iterable[str]) -> frozenset[str]:
    """The nodes that ``node`` hears from (itself included)."""
    return frozenset(n for n in ordered(nodes) if n == node or receives(grudge, node, n))


def connected(grudge: Mapping[str, Collection[str]], a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` hear each other directly (both directions)."""
    return receives(grudge, a, b) and receives(grudge, b, a)


def components(grudge: Mapping[str, Collection[str]], nodes: Iterable[str]) -> list[list[str]]:
    """Groups of nodes connected through two-way links, each in the given order, ordered by first node."""
    listed = ordered(nodes)
    seen: set[str] = set()
    groups: list[list[str]] = []
    for start in listed:
        if start in seen:
            continue
        group = {start}
        frontier = [start]
        while frontier:
            current = frontier.pop()
            for other in listed:
                if other not in group and connected(grudge, current, other):
                    group.add(other)
                    frontier.append(other)
        seen |= group
        groups.append([n for n in listed if n in group])
    return groups


def is_symmetric(grudge: Mapping[str, Collection[str]]) -> bool:
    """Whether every drop is mirrored (an ordinary two-way partition)."""
    return all(node in grudge.get(other, ()) for node, dropped in grudge.items() for other in dropped)


def validate(grudge: Mapping[str, Any], nodes: Iterable[str]) -> Grudge:
    """Check a grudge against the cluster's nodes and return it normalised (frozensets, node order).

    Raises ``ValueError`` with one line naming the problem: an unknown node, a node dropping itself, or a
    value that is not a collection of node names.
    """
    listed = ordered(nodes)
    known = set(listed)
    if not isinstance(grudge, Mapping):
        raise ValueError(f"a grudge maps node -> nodes it drops, not {type(grudge).__name__}")
    unknown = sorted(str(n) for n in grudge if n not in known)
    if unknown:
        raise ValueError(
            f"grudge names unknown node(s) {', '.join(unknown)}; the nodes are {', '.join(listed)}"
        )
    normal: Grudge = {}
    for node in listed:
        if node not in grudge:
            continue
        dropped = grudge[node]
        if isinstance(dropped, str) or not isinstance(dropped, Collection):
            raise ValueError(f"grudge[{node!r}] must be a list of node names, not {dropped!r}")
        bad = sorted(str(n) for n in dropped if n not in known)
        if bad:
            raise ValueError(
                f"grudge[{node!r}] drops unknown node(s) {', '.join(bad)}; the nodes are {', '.join(listed)}"
            )
        if node in dropped:
            raise ValueError(f"grudge[{node!r}] drops its own packets; a node cannot partition itself")
        normal[node] = frozenset(dropped)
    return normal


def to_json(grudge: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """A grudge as plain JSON: node -> sorted list, nodes sorted."""
    return {node: sorted(grudge[node]) for node in sorted(grudge)}


def from_json(data: Any) -> Grudge:
    """The inverse of :func:`to_json`; raises ``ValueError`` on anything else."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a grudge in JSON is an object of node -> [nodes], not {data!r}")
    grudge: Grudge = {}
    for node, dropped in data.items():
        if not isinstance(node, str) or not isinstance(dropped, list):
            raise ValueError(
                f"a grudge in JSON is an object of node -> [nodes]; bad entry {node!r}: {dropped!r}"
            )
        if not all(isinstance(n, str) for n in dropped):
            raise ValueError(f"grudge entry {node!r} must list node names, not {dropped!r}")
        grudge[node] = frozenset(dropped)
    return grudge
