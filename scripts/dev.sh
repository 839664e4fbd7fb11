#!/usr/bin/env bash
# Set up everything XLA Explorer needs, then start the app or run the tests.
#   bash scripts/dev.sh app    install, then serve the app on http://localhost:8501
#   bash scripts/dev.sh test   install (with test tools), then run the whole test suite
#   bash scripts/dev.sh app --torch   the app with PyTorch models too (the [torch] extra, ~3 GB)
# System packages come from apt-get when missing; Python packages go into .venv/ at the repo root.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-app}
shift || true
torch_extra=""
if [ "${1:-}" = --torch ]; then torch_extra=",torch"; shift; fi

need=()
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ "$mode" = test ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  fc-list 2>/dev/null | grep -qi dejavu || need+=(fonts-dejavu-core)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing system packages: ${need[*]}"
  sudo_=""
  [ "$(id -u)" -ne 0 ] && sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The interpreter: $PYTHON if set, else the newest Python on this machine that the newest jax
# supports (jax 0.11 and later need 3.12 or later; 3.11 gets jax 0.10), looked for on the PATH
# and where pyenv and uv keep their installs.
SUPPORTED="3.13 3.12 3.11"
works() { "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
find_python() {  # find_python 3.12 -> a working python3.12, or nothing
  local c
  for c in "python$1" "${PYENV_ROOT:-$HOME/.pyenv}/versions/$1"*/bin/"python$1" \
           "$HOME/.local/share/uv/python/cpython-$1"*/bin/"python$1" "/usr/local/bin/python$1" "/usr/bin/python$1"; do
    if works "$c"; then command -v "$c" 2>/dev/null || echo "$c"; return 0; fi
  done
  return 1
}
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
if [ -n "${PYTHON:-}" ]; then
  PY=$PYTHON
else
  PY=""
  for v in $SUPPORTED; do
    PY=$(find_python "$v") && break
  done
  if [ -z "$PY" ]; then
    echo "no Python 3.11, 3.12 or 3.13 found (on the PATH, in pyenv or uv); install one, or set PYTHON" >&2
    exit 1
  fi
fi
want=$(version_of "$PY")
[ "$want" = 3.11 ] && echo "== Python 3.11 gets jax 0.10, a year behind: the newest jax needs Python 3.12 or 3.13"
if [ -x .venv/bin/python ] && [ "$(version_of .venv/bin/python)" != "$want" ]; then
  echo "== .venv has Python $(version_of .venv/bin/python); making it anew with Python $want"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv (Python $want: $PY)"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)-$mode${torch_extra:+-torch}
# pip's notes about this machine's package-index settings are not ours to show
quiet() { grep -v -e "is ignored: it is neither a file nor a directory" -e "Running pip as the 'root' user" \
               -e "^\[notice\]" >&2 || true; }
if [ ! -f "$stamp" ]; then
  echo "== installing Python packages into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2> >(quiet)
  extra="[frameworks$torch_extra]"  # Flax, Equinox, optax, Keras (and with --torch PyTorch) models compile too
  # the tests run the Ray engine on a local cluster, and PyTorch models through torchax and Inductor
  [ "$mode" = test ] && extra="[test,frameworks,ray,torch]"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extra" 2> >(quiet)
  touch "$stamp"
fi

# The floor of the supported range, jax 0.10, in a venv of its own under .venv/ on Python 3.11 (the
# newest Python it runs on): the whole test command also runs the suite's part without a browser
# or Ray there, so what XLA 0.10 prints stays read as it is (XLA_EXPLORER_OLDEST_JAX=0 skips it).
# It is made before the suite runs: it is also the second XLA release the main run's tests compile
# in (analysis/service/runtimes.py finds .venv/jax-*: docs/runtimes.md).
OLDEST=
oldest_jax_venv() {
  local py v=.venv/jax-0.10
  if [ "$want" = 3.11 ]; then return 0; fi  # .venv itself has jax 0.10: the suite runs on it
  if ! py=$(find_python 3.11); then
    echo "== no Python 3.11 here: the suite's jax 0.10 part is left out"
    return 0
  fi
  [ -x $v/bin/python ] || "$py" -m venv $v
  local leg_stamp=$v/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)
  if [ ! -f "$leg_stamp" ]; then
    echo "== installing jax 0.10 and the test tools into $v (Python 3.11)"
    $v/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2> >(quiet)
    $v/bin/python -m pip install -q --disable-pip-version-check -e ".[test,frameworks,torch]" "jax>=0.10,<0.11" 2> >(quiet)
    touch "$leg_stamp"
  fi
  OLDEST=$v
}
oldest_jax_leg() {
  [ -n "$OLDEST" ] || return 0
  echo "== the suite without its browser and Ray tests, on jax $($OLDEST/bin/python -c 'import jax; print(jax.__version__)') (Python 3.11)"
  $OLDEST/bin/python -m pytest -m "not browser and not ray"
}

case "$mode" in
  app)
    exec .venv/bin/streamlit run app/main.py --server.headless true --browser.gatherUsageStats false "$@" ;;
  test)
    if [ $# -gt 0 ] || [ "${XLA_EXPLORER_OLDEST_JAX:-1}" = 0 ]; then
      exec .venv/bin/python -m pytest "$@"
    fi
    status=0
    oldest_jax_venv || status=$?
    echo "== the whole suite on jax $(.venv/bin/python -c 'import jax; print(jax.__version__)') (Python $want)"
    .venv/bin/python -m pytest || status=$?
    oldest_jax_leg || status=$?
    exit $status ;;
  setup)
    echo "ready" ;;
  *)
    echo "usage: bash scripts/dev.sh app|test|setup" >&2; exit 2 ;;
esac
