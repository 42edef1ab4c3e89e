# Sourced by the set-up scripts: one line per step, the failed step named with what to do, installs as root.
# Callers use `set -Eeuo pipefail` so the ERR trap sees failures inside functions too.
DD_T0=${DD_T0:-$(date +%s)}
DD_STEP="start"
DD_HINT=""

# step NAME [HINT]: say what is being done (stderr, so stdout stays for a script's result); HINT is shown on failure.
step() {
  DD_STEP=$1
  DD_HINT=${2:-}
  echo "[dynadraft $(($(date +%s) - DD_T0))s] $1" >&2
}

# die MESSAGE: stop with one line that says what is wrong and what to do.
die() {
  trap - ERR
  echo "[dynadraft] $1" >&2
  exit "${2:-1}"
}

_dd_on_error() {
  echo "[dynadraft] failed while ${DD_STEP}${DD_HINT:+; $DD_HINT}" >&2
}
trap _dd_on_error ERR

# can_apt: true when we may install Debian packages ourselves (root with apt-get).
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

# apt_install PKG...: install as root, quietly; the package lists are refreshed once per script run.
apt_install() {
  if [ -z "${DD_APT_UPDATED:-}" ]; then
    apt-get update -qq >/dev/null 2>&1 || true
    DD_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The venv's tools (CMake and Ninja from PyPI where the system has none) come before the system's.
if [ -d .venv/bin ]; then PATH="$PWD/.venv/bin:$PATH"; fi
