"""The cluster's topology, defined once: node names, network, subnet, fixed addresses and node image.

`docker-compose.yml` at the top of the repository (the 5-node cluster a user brings up by hand) is
generated from this module and must not be edited by hand: regenerate it with
``python -m harness.topology --write``; tests/harness/test_topology.py fails when the committed file and
the generator differ. The docker platform takes node names and the image from a `Topology` too.

Nodes are n1..nN; node ``n<i>`` has the address ``FIRST_HOST + i - 1`` inside the subnet (n1 = .11).
*Extra hosts* run processes other than data nodes (the fluvio controller's host ``sc``, docs/db-adapter.md);
they count down from ``FIRST_HOST - 1`` (sc = .10), so their addresses do not move with the node count.
The network is internal (no route out of it); the host still reaches the nodes over TCP.

Each node container is limited to ``memory`` (RAM, no swap beyond it) and ``pids`` processes and threads
(defaults :data:`NODE_MEMORY`, :data:`NODE_PIDS`): a node that leaks or forks without end fails on its
own instead of taking the shared machine down. The defaults leave a node of every election mode (the
lease mode's n1..n3 run a data node and a store member each) several times what it uses.

docker-compose.yml declares the five nodes *and* ``sc``: the cluster a user brings up by hand can then
serve every election mode over SSH (a hosts file naming n1..n5 and sc), at the cost of one idle container.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

IMAGE = "chaos-node:latest"
NETWORK = "chaos-net"
SUBNET = "10.55.0.0/24"  # outside Docker's default address pools (172.17-31/16, 192.168/16)
FIRST_HOST = 11
NODE_COUNT = 5
NODE_MEMORY = "1g"
"""Default memory limit per node container, in Docker's notation (``512m``, ``2g``)."""
NODE_PIDS = 512
"""Default limit of processes and threads per node container."""
MIN_MEMORY_BYTES = 64 * 1024**2
MIN_PIDS = 32
COMPOSE_EXTRA_HOSTS = ("sc",)
"""Extra hosts docker-compose.yml declares: the fluvio controller's (``cluster.core.election.fluvio``)."""
COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


@dataclass(frozen=True)
class NodeSpec:
    """One node: its id (also its hostname and its DNS name on the network) and its fixed address."""

    name: str
    address: str


@dataclass(frozen=True)
class Topology:
    """Hosts with fixed addresses on one internal network, all running ``image``: the data nodes n1..nN,
    then any extra hosts (``nodes`` holds both; ``names`` lists both)."""

    nodes: tuple[NodeSpec, ...]
    network: str
    subnet: str
    image: str
    memory: str = NODE_MEMORY
    pids: int = NODE_PIDS

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    def address(self, name: str) -> str:
        for node in self.nodes:
            if node.name == name:
                return node.address
        raise KeyError(f"no node {name!r} in this topology; its nodes are {', '.join(self.names)}")


def topology(
    count: int = NODE_COUNT,
    *,
    subnet: str = SUBNET,
    network: str = NETWORK,
    image: str = IMAGE,
    extra_hosts: Sequence[str] = (),
    memory: str = NODE_MEMORY,
    pids: int = NODE_PIDS,
) -> Topology:
    """The topology of ``count`` nodes n1..n<count> numbered from ``FIRST_HOST`` in ``subnet``, then the
    ``extra_hosts`` numbered down from ``FIRST_HOST - 1``; each node limited to ``memory`` and ``pids``."""
    memory_bytes(memory)
    if not isinstance(pids, int) or isinstance(pids, bool) or pids < MIN_PIDS:
        raise ValueError(f"a node's process limit must be a whole number of at least {MIN_PIDS}, not {pids!r}")
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError as error:
        raise ValueError(f"subnet {subnet!r} is not an IPv4 network like {SUBNET}: {error}") from None
    room = net.num_addresses - 1 - FIRST_HOST  # the broadcast address is not a host
    if not 1 <= count <= room:
        raise ValueError(f"a topology in {subnet} has 1 to {room} nodes, not {count}")
    extra = tuple(extra_hosts)
    if len(extra) >= FIRST_HOST - 1:  # .0 is the network, .1 the gateway
        raise ValueError(f"a topology has at most {FIRST_HOST - 2} extra hosts, not {len(extra)}")
    nodes = tuple(NodeSpec(f"n{i}", str(net.network_address + FIRST_HOST + i - 1)) for i in range(1, count + 1))
    clash = sorted({node.name for node in nodes} & set(extra)) or sorted({h for h in extra if extra.count(h) > 1})
    if clash:
        raise ValueError(f"extra host name(s) {', '.join(clash)} repeat a node or another extra host")
    nodes += tuple(NodeSpec(name, str(net.network_address + FIRST_HOST - 1 - k)) for k, name in enumerate(extra))
    return Topology(nodes=nodes, network=network, subnet=str(net), image=image, memory=memory, pids=pids)


_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def memory_bytes(text: str) -> int:
    """Docker's memory notation (``1g``, ``512m``, ``1048576``) in bytes; at least :data:`MIN_MEMORY_BYTES`.
    ``ValueError`` with one sentence otherwise."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([bkmg]?)\s*", str(text).lower())
    if match is None:
        raise ValueError(f"{text!r} is not a memory size like 512m or 2g")
    size = int(match.group(1)) * _UNITS[match.group(2)]
    if size < MIN_MEMORY_BYTES:
        raise ValueError(f"a node's memory limit of {text!r} is below the {MIN_MEMORY_BYTES // 1024**2}m a node needs")
    return size


DEFAULT_TOPOLOGY = topology()
COMPOSE_TOPOLOGY = topology(extra_hosts=COMPOSE_EXTRA_HOSTS)


def compose_file(top: Topology = COMPOSE_TOPOLOGY) -> str:
    """The text of docker-compose.yml for ``top`` (compose file format 2.4: docker-compose 1.29 and v2)."""
    data = [name for name in top.names if name.startswith("n") and name[1:].isdigit()]
    extra = [name for name in top.names if name not in data]
    also = f" and the host{'s' if len(extra) > 1 else ''} {', '.join(extra)}" if extra else ""
    lines = [
        f"# The {len(data)}-node cluster {data[0]}..{data[-1]}{also}, to bring up by hand:",
        "#   scripts/build-image.sh && docker-compose up -d     (or: docker compose up -d)",
        "# Each node is a plain host running sshd; the harness uploads and starts the system under test.",
        *(["# sc runs the fluvio mode's controller (docs/election-fluvio.md); other modes leave it idle."]
          if "sc" in extra else []),
        "# GENERATED from harness/topology.py by `python -m harness.topology --write`; edit that module,",
        "# not this file (tests/harness/test_topology.py fails when the two differ).",
        'version: "2.4"',
        "services:",
    ]
    for node in top.nodes:
        lines += [
            f"  {node.name}:",
            f"    image: {top.image}",
            f"    container_name: chaos-{node.name}",
            f"    hostname: {node.name}",
            "    init: true",
            f"    mem_limit: {top.memory}",
            f"    memswap_limit: {top.memory}",
            f"    pids_limit: {top.pids}",
            "    cap_add:",
            "      - NET_ADMIN",
            "    networks:",
            "      cluster:",
            f"        ipv4_address: {node.address}",
        ]
    lines += [
        "networks:",
        "  cluster:",
        f"    name: {top.network}",
        "    internal: true",
        "    ipam:",
        "      config:",
        f"        - subnet: {top.subnet}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.topology", description="Print or write docker-compose.yml from the topology."
    )
    parser.add_argument("--write", action="store_true", help=f"write {COMPOSE_FILE} instead of printing it")
    args = parser.parse_args(argv)
    text = compose_file()
    if args.write:
        COMPOSE_FILE.write_text(text)
        print(f"wrote {COMPOSE_FILE}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
