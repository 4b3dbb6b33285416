#!/usr/bin/env bash
# Builds ephemera/agent:<version> (the runner pods' init and sidecar image) and loads it into
# the current kubectl context's cluster, as the Tiltfile's agent-image resource does.
set -euo pipefail
cd "$(dirname "$0")/.."
image="ephemera/agent:$(node -p 'require("./package.json").version')"
bash scripts/images.sh agent
context="$(kubectl config current-context)"
case "$context" in
  kind-*) kind load docker-image "$image" --name "${context#kind-}" ;;
  k3d-*) k3d image import "$image" --cluster "${context#k3d-}" ;;
  minikube) minikube image load "$image" ;;
  *) echo "context $context: push $image to a registry the cluster pulls from, and set EPHEMERA_AGENT_IMAGE to it (docs/deploy.md)" >&2; exit 1 ;;
esac
echo "$image loaded into $context"
