#!/usr/bin/env bash
# Install tvis with its test dependencies, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
export OMP_NUM_THREADS=1
exec .venv/bin/python -m pytest "$@"
