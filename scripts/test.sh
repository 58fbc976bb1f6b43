#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, then build and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec bash scripts/run-tests.sh
