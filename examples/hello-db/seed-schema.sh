#!/usr/bin/env bash
# Embedded into the plugin by `@{embed: ./seed-schema.sh}` when the plugin is applied.
set -euo pipefail
echo "creating tables in ${DATABASE_URL}"
printf 'customers,orders' > /tmp/tables
