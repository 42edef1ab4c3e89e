#!/usr/bin/env bash
# Set up (if needed) and launch the DynaDraft desktop app. Extra arguments go to `dynadraft`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/dynadraft "$@"
