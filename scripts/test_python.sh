#!/usr/bin/env bash
# Run tests under another Python than the one CI uses (3.11): the recorder reads bytecode,
# frames and trace events, and each Python changes them (3.12 inlines comprehensions and
# moves except clauses to the end of the code). Not part of CI: PyPI's torch for other
# Pythons is a CUDA build, about 4.7 GB in the venv (the machine's disk holds a 3.11 CPU
# build only).
#
#   bash scripts/test_python.sh 3.12 [PYTEST ARGS...]    (default: tests/record)
#
# Finds python3.12 on PATH or under pyenv, keeps its venv in .venv-3.12, and installs this
# checkout into it each time: the recorder tests run `tvis` as a command too.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/test_python.sh VERSION [PYTEST ARGS...]}
shift
python=$(command -v "python$version" || true)
if [ -z "$python" ] && command -v pyenv > /dev/null; then
    python=$(ls -d "$(pyenv root)/versions/$version"*/bin/python 2> /dev/null | tail -n 1 || true)
fi
[ -n "$python" ] || { echo "test_python.sh: no python$version on PATH or under pyenv" >&2; exit 2; }
venv=".venv-$version"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q torch==2.13.0
fi
"$venv/bin/pip" install -q ".[test]"
"$venv/bin/pip" install -q --no-deps --force-reinstall .
[ $# -gt 0 ] || set -- tests/record
OMP_NUM_THREADS=1 "$venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider "$@"
