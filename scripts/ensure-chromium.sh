#!/usr/bin/env bash
# What the browser tests need, before `pnpm test` runs them: Debian's chromium
# (/usr/bin/chromium, driven by playwright-core, which downloads no browser of its own).
# Installed with apt when missing. Where it cannot be, one line says so, the browser tests
# are skipped with that reason, and this script still exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .ephemera
rm -f .ephemera/chromium.err
if [ -x "${EPHEMERA_CHROMIUM:-/usr/bin/chromium}" ]; then exit 0; fi
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
# apt-get one at a time on this machine: .ci/run runs these scripts side by side.
apt() { as_root flock /tmp/ephemera-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"; }
echo "installing chromium for the browser tests" >&2
if ! { apt install -y -qq chromium >/dev/null 2>.ephemera/chromium.apt || { apt update -qq && apt install -y -qq chromium >/dev/null 2>.ephemera/chromium.apt; }; }; then
  echo "apt-get install chromium failed: $(tail -n 1 .ephemera/chromium.apt)" > .ephemera/chromium.err
  echo "browser tests not run: $(cat .ephemera/chromium.err)" >&2
fi
exit 0
