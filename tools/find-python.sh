# shellcheck shell=bash
# Sourced by tools/core-matrix.sh and tools/aap.sh.
# The interpreter for Python X.Y: on PATH, then pyenv's versions (its shims answer only for a
# selected version, so they are tried and skipped when they do not), then the usual prefixes.
find_python() {
  local version=$1 candidate pyenv_root
  local candidates=()
  candidate=$(command -v "python$version" 2>/dev/null) && candidates+=("$candidate")
  if command -v pyenv >/dev/null 2>&1 && pyenv_root=$(pyenv root 2>/dev/null); then
    while IFS= read -r candidate; do
      candidates+=("$candidate/bin/python$version")
    done < <(find "$pyenv_root/versions" -mindepth 1 -maxdepth 1 -name "$version.*" 2>/dev/null | sort -t. -k3 -n -r)
  fi
  candidates+=("/usr/local/bin/python$version" "/usr/bin/python$version")
  for candidate in "${candidates[@]}"; do
    [ -x "$candidate" ] || continue
    if [ "$("$candidate" -c 'import sys, venv; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$version" ]; then
      "$candidate" -c 'import sys; print(sys.executable)'
      return 0
    fi
  done
  return 1
}
