# The node image: a plain Debian host on which the harness installs and runs a system under test.
#
# It copies nothing of the project: as Jepsen does, the harness uploads the `cluster` package (or any
# other system's files) onto each node at run time. The image only provides what the harness's Remotes,
# DB adapters and nemesis need on a node: python3, iptables (partitions, packet loss), iproute2 (tc),
# procps (pgrep/kill for kill/pause) and openssh-server (the SSH platform, tested against containers).
#
# BASE_IMAGE is debian:bookworm-slim where a registry is reachable; scripts/build-image.sh passes a base
# bootstrapped from Debian's packages (debootstrap) where none is. On such a base the packages are already
# present and nothing is fetched.
#
# IPTABLES_BACKEND selects Debian's iptables alternative (`legacy` or `nft`); scripts/build-image.sh
# checks that iptables works in a container of the built image on this kernel and rebuilds with the
# other backend when it does not.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG IPTABLES_BACKEND=nft
ENV DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8

RUN set -eu; \
    packages="python3 iptables iproute2 procps openssh-server"; \
    installed=$(dpkg-query -W -f='${Status}\n' $packages 2>/dev/null | grep -c '^install ok installed$' || true); \
    if [ "$installed" -ne 5 ]; then \
      apt-get update; \
      apt-get install -y --no-install-recommends $packages; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    update-alternatives --set iptables "/usr/sbin/iptables-${IPTABLES_BACKEND}"; \
    update-alternatives --set ip6tables "/usr/sbin/ip6tables-${IPTABLES_BACKEND}"; \
    mkdir -p /run/sshd /root/.ssh; \
    chmod 700 /root/.ssh; \
    rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub; \
    printf '%s\n' 'HostKey /etc/ssh/ssh_host_ed25519_key' 'PermitRootLogin prohibit-password' \
      'PasswordAuthentication no' 'UseDNS no' > /etc/ssh/sshd_config.d/chaos-node.conf

# The host key is generated per container when it starts (never baked into the image, so no two nodes
# share one; ed25519 only: an RSA key costs 0.7 s of CPU per node start). The SSH platform pins each
# node's key from /etc/ssh/ssh_host_ed25519_key.pub. The container only has to stay up: the harness
# starts the system under test itself.
CMD ["/bin/sh", "-c", "[ -s /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key; mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"]
