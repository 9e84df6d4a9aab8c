#!/usr/bin/env bash
# The ansible-core matrix (tests/cores/matrix.txt): for each core, a virtualenv of its own on a
# controller Python that core supports, then
#   sanity   ansible-test sanity (empty ignore files) under that core; on the oldest core also the
#            compile and import tests on every target Python it accepts that tests/config.yml admits;
#   drill    on the oldest and the newest core: the host-platform end-to-end drill on the lab
#            (tests/functional/test_runbook.py: diagnose, purge, restart, validate, report, rollback).
# A core that cannot be tested (no Python for it, pip failure) is named and the run fails, unless the
# matrix is narrowed on purpose: VLLM_DR_CORES="2.16 2.21".
#   VLLM_DR_CORE_JOBS=N       cores run N at a time (default 2)
#   VLLM_DR_FULL_SANITY=...   cores that run every sanity test (default: all; "oldest" and "newest" name
#                             those, "none" none); the others run only VLLM_DR_SANITY_TESTS
#   VLLM_DR_SANITY_TESTS=...  the sanity tests of the other cores (default: compile import validate-modules)
#   VLLM_DR_SKIP_CORES=...    cores left out because another gate tests them (named in the output)
#   VLLM_DR_DRILL_SELECT=...  a pytest -k expression: only these tests of the drill (default: the whole file)
# Virtualenvs and ansible-test's own environments live under ~/.cache/inferops-vllm-dr/cores;
# logs and ansible-test results under reports/cores/<core>/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${VLLM_DR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inferops-vllm-dr}/cores
reports=$root/reports/cores
matrix=$root/tests/cores/matrix.txt
stages=${1:-all}
jobs=${VLLM_DR_CORE_JOBS:-2}

log() { printf 'core-matrix: %s\n' "$*" >&2; }
# shellcheck source=tools/side-venv.sh
. "$root/tools/side-venv.sh"

all_cores=$(awk '/^[0-9]/ {print $1}' "$matrix")
cores=${VLLM_DR_CORES:-$all_cores}
oldest=$(head -n1 <<<"$all_cores")
newest=$(tail -n1 <<<"$all_cores")
full_sanity=${VLLM_DR_FULL_SANITY:-all}
full_sanity=${full_sanity//all/$all_cores}
full_sanity=${full_sanity//oldest/$oldest}
full_sanity=${full_sanity//newest/$newest}
full_sanity=${full_sanity//none/}
read -ra partial_tests <<<"${VLLM_DR_SANITY_TESTS:-compile import validate-modules}"
drill_select=${VLLM_DR_DRILL_SELECT:-}
for core in $cores; do
  grep -qE "^${core}[[:space:]]" "$matrix" || { log "core $core is not in $matrix"; exit 2; }
done
[ "$cores" = "$all_cores" ] || log "matrix narrowed on purpose to: $(tr '\n' ' ' <<<"$cores")"
for core in ${VLLM_DR_SKIP_CORES:-}; do
  log "ansible-core $core: left out here, another gate tests it"
  cores=$(grep -vxF -- "$core" <<<"$cores" || true)
done

# find_python X.Y: the interpreter for Python X.Y (tools/find-python.sh)
# shellcheck source=tools/find-python.sh
. "$root/tools/find-python.sh"

# A virtualenv for a core (its pin, plus the modules' and the lab's requirements when it runs the
# drill), rebuilt only when its inputs change.
make_venv() {
  local core=$1 pin=$2 python=$3 with_drill=$4 venv want
  venv=$cache/$core-py$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  local reqs=("$pin")
  if [ "$with_drill" = yes ]; then
    # the lab and the tests, without the collection bundle and tools that pin their own ansible-core
    grep -vE '^(ansible|ansible-core|ansible-lint|antsibull-changelog|molecule|pytest-testinfra)[=<>]' \
      "$root/tests/requirements.txt" > "$cache/$core.drill-requirements.txt"
    reqs+=(-r "$root/requirements.txt" -r "$cache/$core.drill-requirements.txt")
  fi
  local inputs=/dev/null
  [ "$with_drill" = yes ] && inputs=$cache/$core.inputs.txt && cat "$root/requirements.txt" "$cache/$core.drill-requirements.txt" > "$inputs"
  side_venv "$python" "$venv" "$inputs" "${reqs[@]}" >&2
  echo "$venv"
}

# Target Pythons of the oldest core that tests/config.yml admits: each must be found.
target_pythons() {
  local venv=$1
  "$venv/bin/python" - "$root/tests/config.yml" <<'PY'
import sys
import yaml
from packaging.specifiers import SpecifierSet
from ansible_test._util.target.common.constants import CONTROLLER_PYTHON_VERSIONS, REMOTE_ONLY_PYTHON_VERSIONS
spec = SpecifierSet(yaml.safe_load(open(sys.argv[1]))['modules']['python_requires'])
print(' '.join(v for v in REMOTE_ONLY_PYTHON_VERSIONS + CONTROLLER_PYTHON_VERSIONS if spec.contains(v + '.0')))
PY
}

# Whether ansible-test ran the compile and import tests on each of the given Pythons (it skips a missing one).
all_ran() {
  local log=$1 version test
  shift
  for version in "$@"; do
    for test in compile import; do
      grep -qF "Running sanity test \"$test\" on Python $version" "$log" || return 1
    done
  done
}

run_core() {
  local core=$1 pin pythons python version venv drill=no home out status=0
  read -r _ pin pythons <<<"$(grep -E "^${core}[[:space:]]" "$matrix")"
  out=$reports/$core
  rm -rf "$out"; mkdir -p "$out"
  for version in $pythons; do python=$(find_python "$version") && break; done
  if [ -z "${python:-}" ]; then
    echo "ansible-core $core: UNTESTED: no controller Python found (wanted one of: $pythons)" > "$out/result"
    return 1
  fi
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  { [ "$core" = "$oldest" ] || [ "$core" = "$newest" ]; } && drill=yes
  local started=$SECONDS
  if ! venv=$(make_venv "$core" "$pin" "$python" "$drill" 2>>"$out/log"); then
    echo "ansible-core $core: UNTESTED: its virtualenv could not be built on Python $version (see $out/log)" > "$out/result"
    return 1
  fi
  home=$cache/home-$core   # ansible-test keeps its environments under $HOME: one per core
  mkdir -p "$home"
  local summary=("ansible-core $core ($pin, controller Python $version):")
  if [[ $stages == all || $stages == sanity ]]; then
    local tests=() test
    if ! grep -qwF -- "$core" <<<"$full_sanity"; then
      for test in "${partial_tests[@]}"; do tests+=(--test "$test"); done
    fi
    if HOME=$home VLLM_DR_VENV=$venv VLLM_DR_TEST_REPORTS=$out/ansible-test \
        bash "$root/tools/ansible-test.sh" sanity --python "$version" --color no "${tests[@]}" >>"$out/log" 2>&1; then
      summary+=("sanity${tests:+ (${partial_tests[*]})} passed;")
    else
      summary+=("sanity FAILED;"); status=1
    fi
    if [ "$core" = "$oldest" ]; then
      local targets target_list bindir=$cache/pythons-$core missing=()
      targets=$(target_pythons "$venv")
      rm -rf "$bindir"; mkdir -p "$bindir"
      for version in $targets; do
        if python=$(find_python "$version"); then ln -s "$python" "$bindir/python$version"; else missing+=("$version"); fi
      done
      if [ ${#missing[@]} -gt 0 ]; then
        summary+=("UNTESTED target Pythons ${missing[*]} (not found);"); status=1
      elif PATH=$bindir:$PATH HOME=$home VLLM_DR_VENV=$venv VLLM_DR_TEST_REPORTS=$out/ansible-test-targets \
          bash "$root/tools/ansible-test.sh" sanity --test compile --test import --color no >"$out/targets.log" 2>&1 \
          && read -ra target_list <<<"$targets" && all_ran "$out/targets.log" "${target_list[@]}"; then
        summary+=("compile and import on target Pythons $(tr '\n' ' ' <<<"$targets")passed;")
      else
        summary+=("compile/import on target Pythons $(tr '\n' ' ' <<<"$targets")FAILED;"); status=1
      fi
    fi
  fi
  if [[ $drill == yes && ( $stages == all || $stages == drill ) ]]; then
    if (cd "$root" && "$venv/bin/python" -m pytest -p no:cacheprovider tests/functional/test_runbook.py \
        ${drill_select:+-k "$drill_select"} --junitxml="$out/drill.xml") >>"$out/log" 2>&1; then
      summary+=("drill${drill_select:+ (-k $drill_select)} passed;")
    else
      summary+=("drill FAILED;"); status=1
    fi
  fi
  summary+=("$((SECONDS - started))s")
  echo "${summary[*]}" > "$out/result"
  return $status
}

mkdir -p "$cache" "$reports"
started=$SECONDS
for core in $cores; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  log "ansible-core $core: started (log: reports/cores/$core/log)"
  run_core "$core" &
done
wait || true
failed=0
for core in $cores; do
  cat "$reports/$core/result" 2>/dev/null || echo "ansible-core $core: UNTESTED (no result)"
  if [ ! -f "$reports/$core/result" ] || grep -qE 'FAILED|UNTESTED' "$reports/$core/result"; then failed=1; fi
done
log "matrix done in $((SECONDS - started))s"
exit $failed
