#!/usr/bin/env bash
# Install tvis into ./.venv. `--test` adds what the test suite needs (pytest, tmux).
# torch is installed first, pinned to 2.13.0: its CPU build is what these machines carry,
# while an unpinned install would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
py=.venv/bin/python
$py -m pip install --quiet --upgrade pip
if ! $py -c "import torch" 2>/dev/null; then
    $py -m pip install --quiet torch==2.13.0
fi
if [ "${1:-}" = "--test" ]; then
    $py -m pip install --quiet -e ".[test]"
    if ! command -v tmux >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1 \
                || echo "install.sh: could not install tmux; the tmux end-to-end test will be skipped" >&2
        else
            echo "install.sh: tmux not found; the tmux end-to-end test will be skipped" >&2
        fi
    fi
else
    $py -m pip install --quiet -e .
fi
echo "tvis installed: .venv/bin/tvis"
