"""The cluster's topology, defined once: node names, network, subnet, fixed addresses and node image.

`docker-compose.yml` at the top of the repository (the 5-node cluster a user brings up by hand) is
generated from this module and must not be edited by hand: regenerate it with
``python -m harness.topology --write``; tests/harness/test_topology.py fails when the committed file and
the generator differ. The docker platform takes node names and the image from a `Topology` too.

Nodes are n1..nN; node ``n<i>`` has the address ``FIRST_HOST + i - 1`` inside the subnet (n1 = .11).
The network is internal (no route out of it); the host still reaches the nodes over TCP.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from dataclasses import dataclass
from pathlib import Path

IMAGE = "chaos-node:latest"
NETWORK = "chaos-net"
SUBNET = "10.55.0.0/24"  # outside Docker's default address pools (172.17-31/16, 192.168/16)
FIRST_HOST = 11
NODE_COUNT = 5
COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


@dataclass(frozen=True)
class NodeSpec:
    """One node: its id (also its hostname and its DNS name on the network) and its fixed address."""

    name: str
    address: str


@dataclass(frozen=True)
class Topology:
    """N nodes with fixed addresses on one internal network, all running ``image``."""

    nodes: tuple[NodeSpec, ...]
    network: str
    subnet: str
    image: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    def address(self, name: str) -> str:
        for node in self.nodes:
            if node.name == name:
                return node.address
        raise KeyError(f"no node {name!r} in this topology; its nodes are {', '.join(self.names)}")


def topology(
    count: int = NODE_COUNT, *, subnet: str = SUBNET, network: str = NETWORK, image: str = IMAGE
) -> Topology:
    """The topology of ``count`` nodes n1..n<count> numbered from ``FIRST_HOST`` in ``subnet``."""
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError as error:
        raise ValueError(f"subnet {subnet!r} is not an IPv4 network like {SUBNET}: {error}") from None
    room = net.num_addresses - 1 - FIRST_HOST  # the broadcast address is not a host
    if not 1 <= count <= room:
        raise ValueError(f"a topology in {subnet} has 1 to {room} nodes, not {count}")
    nodes = tuple(NodeSpec(f"n{i}", str(net.network_address + FIRST_HOST + i - 1)) for i in range(1, count + 1))
    return Topology(nodes=nodes, network=network, subnet=str(net), image=image)


DEFAULT_TOPOLOGY = topology()


def compose_file(top: Topology = DEFAULT_TOPOLOGY) -> str:
    """The text of docker-compose.yml for ``top`` (compose file format 2.4: docker-compose 1.29 and v2)."""
    lines = [
        f"# The {len(top.nodes)}-node cluster {top.names[0]}..{top.names[-1]}, to bring up by hand:",
        "#   scripts/build-image.sh && docker-compose up -d     (or: docker compose up -d)",
        "# Each node is a plain host running sshd; the harness uploads and starts the system under test.",
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
