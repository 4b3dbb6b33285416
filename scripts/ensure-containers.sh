#!/usr/bin/env bash
# What the container tests need, before `pnpm test` runs them: Docker (scripts/ensure-docker.sh
# installs and starts it) and the base images (scripts/base-images.sh: debian:bookworm-slim,
# which kube-sim's docker runtime runs pods on, and ephemera/node). Where Docker cannot run,
# one line says so and the container tests are skipped; this script still exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .ephemera
if ! bash scripts/ensure-docker.sh 2>.ephemera/ensure-docker.err; then
  echo "container tests not run: $(tail -n 1 .ephemera/ensure-docker.err)" >&2
  exit 0
fi
bash scripts/base-images.sh >/dev/null
