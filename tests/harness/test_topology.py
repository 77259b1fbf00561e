"""The topology is the one source of docker-compose.yml: the committed file must equal the generated one."""

from __future__ import annotations

import ipaddress

import pytest

from harness.topology import COMPOSE_FILE, DEFAULT_TOPOLOGY, FIRST_HOST, compose_file, topology


def test_committed_compose_file_is_the_generated_one() -> None:
    assert COMPOSE_FILE.read_text() == compose_file(), (
        "docker-compose.yml differs from harness/topology.py: run `python -m harness.topology --write`"
    )


def test_default_topology_is_five_nodes_with_fixed_distinct_addresses_in_the_subnet() -> None:
    assert DEFAULT_TOPOLOGY.names == ("n1", "n2", "n3", "n4", "n5")
    subnet = ipaddress.IPv4Network(DEFAULT_TOPOLOGY.subnet)
    addresses = [ipaddress.IPv4Address(node.address) for node in DEFAULT_TOPOLOGY.nodes]
    assert all(address in subnet for address in addresses)
    assert len(set(addresses)) == 5
    assert addresses[0] == subnet.network_address + FIRST_HOST
    assert DEFAULT_TOPOLOGY.address("n3") == str(subnet.network_address + FIRST_HOST + 2)


def test_compose_file_declares_every_node_on_the_internal_network_with_net_admin() -> None:
    small = topology(3, subnet="10.9.8.0/24", network="other-net", image="img:1")
    text = compose_file(small)
    for node in small.nodes:
        assert f"  {node.name}:\n    image: img:1\n" in text
        assert f"        ipv4_address: {node.address}\n" in text
    assert text.count("      - NET_ADMIN\n") == 3
    assert "    name: other-net\n    internal: true\n" in text
    assert "        - subnet: 10.9.8.0/24\n" in text
    assert "n4:" not in text


def test_unknown_node_names_the_nodes_there_are() -> None:
    with pytest.raises(KeyError, match="n1, n2, n3, n4, n5"):
        DEFAULT_TOPOLOGY.address("n9")


@pytest.mark.parametrize(
    ("count", "subnet", "message"),
    [
        (0, "10.55.0.0/24", "1 to 244 nodes, not 0"),
        (6, "10.55.0.0/28", "1 to 4 nodes, not 6"),
        (3, "10.55.0.1/24", "not an IPv4 network"),
        (3, "fd00::/64", "not an IPv4 network"),
    ],
)
def test_bad_topologies_are_refused_with_the_reason(count: int, subnet: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        topology(count, subnet=subnet)
