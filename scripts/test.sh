#!/usr/bin/env bash
# The project's one test command (README "Quick start" and .ci/run both call it):
# create .venv if needed, install requirements-dev.txt into it, run the whole pytest suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not browser"`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt

status=0
.venv/bin/python -m pytest "$@" || status=$?
if [[ $status -eq 5 ]]; then
    # pytest's "no tests collected": a suite that ran nothing must not look green.
    echo "scripts/test.sh: pytest collected no tests; treating that as a failure" >&2
    exit 1
fi
exit "$status"
