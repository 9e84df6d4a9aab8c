# shellcheck shell=bash
# Sourced by tools/core-matrix.sh, tools/floors.sh and tools/aap.sh: the virtualenvs they test in, beside the
# project's own (.venv).
#
# side_venv PYTHON VENV INPUTS_FILE PIP_ARGS...
#   makes VENV on PYTHON with PIP_ARGS installed, unless it exists and was made from the same PYTHON, PIP_ARGS
#   and INPUTS_FILE (the requirement files named in PIP_ARGS, concatenated by the caller; /dev/null for none).
# The virtualenv gets no pip of its own: the project's pip installs into it (pip --python), and without
# bytecode compilation. On a busy two-core machine `python -m venv` spent 80 s in ensurepip and pip
# another minute compiling ansible-core; neither is needed here (ansible-test bootstraps pip into the
# environments it makes itself, and Python compiles what it imports).
side_venv() {
  local python=$1 venv=$2 inputs=$3 want
  shift 3
  local pip=("${VLLM_DR_VENV:-$root/.venv}/bin/python" -m pip)
  want=$( { printf '%s\n' "$python" "$@"; cat "$inputs"; } | sha256sum | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.inputs.sha256" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  printf 'making %s\n' "$venv" >&2
  rm -rf "$venv"
  "$python" -m venv --without-pip "$venv"
  "${pip[@]}" --python "$venv/bin/python" install -q --no-compile --disable-pip-version-check "$@"
  echo "$want" > "$venv/.inputs.sha256"
}
