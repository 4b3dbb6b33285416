#!/usr/bin/env bash
# Makes sure the tools the process driver's step networks need are here (ip, nft): without
# nft a root runner gives its steps loopback only (docs/security.md, "Network").
set -euo pipefail
# apt-get one at a time on this machine: .ci/run runs these scripts side by side.
apt() { as_root flock /tmp/ephemera-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"; }
command -v ip >/dev/null && command -v nft >/dev/null && exit 0
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
echo "installing iproute2 and nftables" >&2
apt update -qq && apt install -y -qq iproute2 nftables >/dev/null
