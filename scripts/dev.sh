#!/usr/bin/env bash
# Set up everything XLA Explorer needs, then start the app or run the tests.
#   bash scripts/dev.sh app    install, then serve the app on http://localhost:8501
#   bash scripts/dev.sh test   install (with test tools), then run the whole test suite
# System packages come from apt-get when missing; Python packages go into .venv/ at the repo root.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-app}
shift || true

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

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)-$mode
# pip's notes about this machine's package-index settings are not ours to show
quiet() { grep -v -e "is ignored: it is neither a file nor a directory" -e "Running pip as the 'root' user" \
               -e "^\[notice\]" >&2 || true; }
if [ ! -f "$stamp" ]; then
  echo "== installing Python packages into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2> >(quiet)
  extra="[frameworks]"  # Flax, Equinox, optax, Keras: models written with them compile too
  [ "$mode" = test ] && extra="[test,frameworks,ray]"  # the tests run the Ray engine on a local cluster
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extra" 2> >(quiet)
  touch "$stamp"
fi

case "$mode" in
  app)
    exec .venv/bin/streamlit run app/main.py --server.headless true --browser.gatherUsageStats false "$@" ;;
  test)
    exec .venv/bin/python -m pytest "$@" ;;
  setup)
    echo "ready" ;;
  *)
    echo "usage: bash scripts/dev.sh app|test|setup" >&2; exit 2 ;;
esac
