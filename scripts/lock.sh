#!/usr/bin/env bash
# Re-pin the test command's Python packages: write scripts/constraints.txt from what .venv has now.
# Usage: scripts/setup.sh --dev, upgrade what you mean to (e.g. .venv/bin/pip install -U ruff), run the gates and
# tests, then scripts/lock.sh and commit the file. The app's launch keeps pyproject.toml's ranges; only the test
# command (setup.sh --dev) installs with these pins, so a new release of ruff, mypy or pytest cannot fail CI
# without a change here.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
VENV=${DYNADRAFT_VENV:-.venv}
[ -x "$VENV/bin/python" ] || { echo "no .venv: run scripts/setup.sh --dev first" >&2; exit 2; }
{
  echo "# Written by scripts/lock.sh from a working .venv; used by scripts/setup.sh --dev (pip -c). Do not edit by hand."
  # llama-cpp-python comes from the wheel setup.sh builds (pinned in pyproject.toml); DynaDraft itself is editable.
  "$VENV/bin/python" -m pip freeze --exclude-editable --all | grep -v -i -E '^(llama[-_]cpp[-_]python|dynadraft)\b' \
    | grep -v ' @ ' | LC_ALL=C sort -f
} >scripts/constraints.txt
echo "wrote scripts/constraints.txt ($(grep -vc '^#' scripts/constraints.txt) pins)"
