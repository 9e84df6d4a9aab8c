#!/usr/bin/env bash
# Installs what `make test`, `make demo` and the benchmarks need, from the
# project's own files only: Debian packages from bindep.txt ([test] profile)
# and a virtualenv from requirements.txt + tests/requirements.txt.
# Re-running it is cheap: it only acts when something is missing or changed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VLLM_DR_VENV:-$root/.venv}
python=${PYTHON:-python3}

log() { printf 'bootstrap: %s\n' "$*" >&2; }

install_debian_packages() {
  local wanted=() missing=() pkg
  # bindep lines look like: "redis-server [test platform:dpkg]"
  while read -r pkg; do wanted+=("$pkg"); done < <(
    awk '/^[^#]/ && /\[/ && /test/ && /platform:dpkg/ {print $1}' "$root/bindep.txt")
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null; then
    log "missing Debian packages ${missing[*]} and no apt-get here; install them by hand"
    return 1
  fi
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  log "installing Debian packages: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

install_virtualenv() {
  local stamp="$venv/.requirements.sha256" want
  want=$(cat "$root/requirements.txt" "$root/tests/requirements.txt" | sha256sum | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  log "creating virtualenv $venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$root/requirements.txt" -r "$root/tests/requirements.txt"
  echo "$want" > "$stamp"
}

install_debian_packages
install_virtualenv
