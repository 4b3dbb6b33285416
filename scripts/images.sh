#!/usr/bin/env bash
# `pnpm images`: builds ephemera's images with Docker, tagged with the workspace's version:
# ephemera/sandbox, scheduler, runner, iocontext, webhook, tunnel, console, agent and router (or the ROLEs named).
# The workspace is built and each image's files are staged on the host (.ephemera/images/<role>),
# and the Dockerfile copies them onto the Node image scripts/base-images.sh gives (the
# official node:*-bookworm-slim when a registry serves it, else one made from Debian's
# packages). Only the router's first build needs the network: it installs iptables from
# Debian's mirrors, a layer Docker keeps.
#   scripts/images.sh [--stage] [--no-build] [ROLE...]
#     --stage: build and stage only, no Docker (Tilt); --no-build: the workspace is built already
#     (pnpm test's suite: rebuilding would rewrite the bundles other suites are running)
# Exit 3: Docker cannot run here (the reason on stderr, from ensure-docker.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "images: $*" >&2; }
# One build at a time: two at once (two test suites, a demo) would stage into the same directories.
mkdir -p .ephemera
exec 9>.ephemera/images.lock
flock 9
SERVICES=(sandbox scheduler runner iocontext webhook tunnel console)
stage_only=false
build=true
roles=()
for arg in "$@"; do
  case "$arg" in
    --stage) stage_only=true ;;
    --no-build) build=false ;;
    *) roles+=("$arg") ;;
  esac
done
[ ${#roles[@]} -gt 0 ] || roles=(agent "${SERVICES[@]}" router)
# The Dockerfile's stages in order: Docker's legacy builder builds every stage before the
# target one, so building a role needs the files of those before it staged too.
STAGES=(agent "${SERVICES[@]}" router)
version=$(node -p 'require("./package.json").version')

! $build || pnpm -s build >&2
# What staging copies from (every package's build, the lockfile and manifests, the router's
# script, the example): a role staged from the same sources is not staged again, so the test
# suites and demos that call this script after one another pay for `pnpm deploy` once.
sources=$({ find services/*/dist services/router/bin examples/routing/app -type f -print0 | sort -z | xargs -0 sha256sum
  sha256sum pnpm-lock.yaml services/*/package.json; } | sha256sum | cut -c1-16)
stage() {
  local role=$1 dir=.ephemera/images/$1 stamp=.ephemera/images/.sources-$1
  [ -d "$dir" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sources" ] && return 0
  rm -rf "$dir" "$stamp" && mkdir -p "$dir"
  case "$role" in
    # The agent is one bundle and its entry; the image makes their V8 code cache with its own Node.
    agent) cp services/io-agent/dist/agent.cjs services/io-agent/dist/agent-bundle.cjs "$dir/" ;;
    # The router is one bundle, and its init container one shell script.
    router) install -m 0644 services/router/dist/router.cjs "$dir/"
      install -m 0755 services/router/bin/ephemera-router-init "$dir/" ;;
    sandbox | scheduler | runner | iocontext | webhook | tunnel | console)
      # --legacy: the workspace does not inject its packages, and the injected layout would name
      # them by this checkout's absolute path (the Tiltfile syncs into node_modules/.pnpm/@ephemera+kit@file+services+kit).
      # It resolves the dependencies' ranges again: from the store's metadata, the registry only for what it lacks.
      pnpm --filter "@ephemera/$role" deploy --prod --legacy --prefer-offline --ignore-scripts "$dir" >/dev/null 2>&1 \
        || pnpm --filter "@ephemera/$role" deploy --prod --legacy --prefer-offline --ignore-scripts "$dir" >&2
      # Only what runs: no type declarations, source maps or build info in an image, nor pnpm's
      # own records (.modules.yaml holds the time of the deploy: the same files would be a new image).
      find "$dir" \( -name '*.d.ts' -o -name '*.d.ts.map' -o -name '*.js.map' -o -name '*.tsbuildinfo' \) -delete
      # Nor what made every checkout's images differ (and be built again) though nothing in them
      # had changed: the packages' command shims, which nothing in an image runs and which name
      # this checkout's absolute path, and the agent bundle's V8 code cache, which this build's
      # Node made (not the same bytes twice; the agent image makes its own).
      find "$dir" -type d -path '*/node_modules/.bin' -prune -exec rm -rf {} +
      find "$dir" -name agent-bundle.cache -delete
      rm -f "$dir/node_modules/.modules.yaml" "$dir/node_modules/.pnpm/lock.yaml" ;;
    # The routing example's app (examples/routing/app, its own Dockerfile): built on request
    # (`scripts/images.sh example-echo`, as `pnpm demo:routing` does), not with ephemera's own.
    example-echo) cp examples/routing/app/echo.js examples/routing/app/Dockerfile "$dir/" ;;
    *) say "no image $role (${STAGES[*]}, example-echo)"; exit 2 ;;
  esac
  echo "$sources" >"$stamp"
}
for role in "${roles[@]}"; do stage "$role"; done
if ! $stage_only; then
  for role in "${roles[@]}"; do
    # The example has a Dockerfile of its own: no stage of ./Dockerfile comes before it.
    [ "$role" != example-echo ] || continue
    for earlier in "${STAGES[@]}"; do
      [ "$earlier" != "$role" ] || break
      [ -d ".ephemera/images/$earlier" ] || stage "$earlier"
    done
  done
fi
$stage_only && exit 0

bash scripts/ensure-docker.sh
base=$(bash scripts/base-images.sh)
say "building on $base"
base_size=$(docker image inspect -f '{{ .Size }}' "$base")
base_id=$(docker image inspect -f '{{ .Id }}' "$base")
# What an image is made of (its staged files, the Dockerfile, the base): an image already
# labelled with it is kept, since the legacy builder takes long even when every layer is cached.
inputs() {
  { tar -C .ephemera/images --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "$1" | sha256sum
    sha256sum Dockerfile; echo "$base_id"; } | sha256sum | cut -c1-16
}
for role in "${roles[@]}"; do
  image="ephemera/$role:$version"
  hash=$(inputs "$role")
  if [ "$(docker image inspect -f '{{ index .Config.Labels "dev.ephemera.inputs" }}' "$image" 2>/dev/null)" != "$hash" ]; then
    # The legacy builder's deprecation notice on every build is noise: its output only when it fails.
    # ephemera's images are stages of ./Dockerfile; the example's, its own directory.
    context=(--target "$role" .)
    [ "$role" = example-echo ] && context=(".ephemera/images/$role")
    log=$(DOCKER_BUILDKIT=0 docker build -q --build-arg "NODE_IMAGE=$base" \
      --label "dev.ephemera.inputs=$hash" -t "$image" "${context[@]}" 2>&1) || { echo "$log" >&2; say "building $image failed"; exit 1; }
  fi
  size=$(docker image inspect -f '{{ .Size }}' "$image")
  say "$(awk -v i="$image" -v s="$size" -v b="$base_size" 'BEGIN { printf "%-26s %4.0f MB, %5.1f MB on the base", i, s / 1e6, (s - b) / 1e6 }')"
done
