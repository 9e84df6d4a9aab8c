#!/usr/bin/env bash
# Builds what the AWX test runs on, once, into $VLLM_DR_K8S_CACHE (default ~/.cache/inferops-vllm-dr):
#   awx-24.6.1-<key>/src        AWX 24.6.1 from the vendored archive (../shared/vendor/awx-24.6.1.tar.gz, or
#                               $VLLM_DR_AWX_ARCHIVE), without awx/devonly.py: AWX then runs as its release packages
#                               do (production mode, no drf_yasg / debug_toolbar)
#   awx-24.6.1-<key>/venv       Python 3.11 with AWX's requirements as tools/aap/awx-requirements.txt amends them
#   awx-24.6.1-<key>/pgdata     a PostgreSQL 15 cluster with AWX's database migrated (copied per test run: a
#                               migration takes minutes) and the SECRET_KEY its encrypted fields were written with
#   receptor-cl-v1.4.4/bin      receptor, from the Go module proxy (tools/go-tool.sh)
# <key> is a digest of the archive, the requirements file and the Python, so a change to any rebuilds. A part already
# there is kept. Prints the AWX directory on stdout; progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=24.6.1
receptor_version=v1.4.4
archive=${VLLM_DR_AWX_ARCHIVE:-$root/../shared/vendor/awx-$version.tar.gz}
requirements=$root/tools/aap/awx-requirements.txt
python=${AWX_PYTHON:-$(command -v python3.11 || true)}
pgbin=${AWX_PG_BIN:-/usr/lib/postgresql/15/bin}
cache_root=${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}

log() { echo "awx build: $*" >&2; }
die() { echo "awx build: $*" >&2; exit 1; }

[ -f "$archive" ] || die "no AWX source archive at $archive; set VLLM_DR_AWX_ARCHIVE to awx-$version.tar.gz"
{ [ -n "$python" ] && [ -x "$python" ]; } || die "Python 3.11 not found; install python3.11 (bindep.txt) or set AWX_PYTHON"
[ -x "$pgbin/initdb" ] || die "PostgreSQL 15 not found in $pgbin; install postgresql-15 (bindep.txt) or set AWX_PG_BIN"

key=$( { sha256sum < "$archive"; cat "$requirements"; "$python" -c 'import sys; print(sys.version)'; } |
  sha256sum | cut -c1-12)
cache=$cache_root/awx-$version-$key
mkdir -p "$cache"

# One build at a time per cache: a second caller waits, then finds the parts there.
exec 9>"$cache/.lock"
flock 9


if [ ! -f "$cache/src/.complete" ]; then
  log "AWX $version source from $archive"
  rm -rf "$cache/src"
  mkdir -p "$cache/src"
  tar -xzf "$archive" -C "$cache/src" --strip-components=1
  rm -f "$cache/src/awx/devonly.py"
  echo "$version" > "$cache/src/VERSION"
  touch "$cache/src/.complete"
fi

if [ ! -f "$cache/venv/.complete" ]; then
  start=$SECONDS
  log "AWX virtualenv on $python (several minutes)"
  rm -rf "$cache/venv"
  # AWX's pins, less those the project's file replaces, then the project's file
  names=$(sed -n 's/^\([A-Za-z0-9_.-]*\).*/\1/p' "$requirements" | tr 'A-Z_' 'a-z-')
  awk -v names="$names uwsgi uwsgitop" '
    BEGIN { n = split(names, list, " "); for (i = 1; i <= n; i++) skip[list[i]] = 1 }
    /^[A-Za-z0-9]/ { name = tolower($0); sub(/[=<>\[; ].*/, "", name); gsub(/_/, "-", name); if (name in skip) next }
    { print }' "$cache/src/requirements/requirements.txt" > "$cache/requirements.txt"
  cat "$requirements" >> "$cache/requirements.txt"
  "$python" -m venv "$cache/venv"
  "$cache/venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile \
    -r "$cache/requirements.txt" >&2 || die "installing AWX's requirements failed (see above)"
  "$cache/venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile --no-deps \
    --no-build-isolation "$cache/src" >&2 || die "installing AWX failed (see above)"
  touch "$cache/venv/.complete"
  log "AWX virtualenv done in $((SECONDS - start)) s"
fi

# receptor: `go install pkg@version` asks the proxy for the module's version list, which it refuses for this module;
# the one version is downloaded by name and built in place.
GO_TOOL_BUILD="src=\$(go mod download -json github.com/ansible/receptor@$receptor_version |
    sed -n 's/^[[:space:]]*\"Dir\": \"\\(.*\\)\",\$/\\1/p') && test -d \"\$src\" &&
    (cd \"\$src\" && go build -ldflags '-s -w' -o \"\$OLDPWD/receptor-cl\" ./cmd/receptor-cl)" \
  bash "$root/tools/go-tool.sh" receptor-cl github.com/ansible/receptor/cmd/receptor-cl "$receptor_version" -- --version >&2 ||
  die "receptor $receptor_version did not build"
receptor=$cache_root/receptor-cl-$receptor_version/bin/receptor-cl
ln -sfn "$receptor" "$cache/receptor-cl"

if [ ! -f "$cache/pgdata/.complete" ]; then
  start=$SECONDS
  log "AWX database: migrate (minutes)"
  rm -rf "$cache/pgdata" "$cache/.migrate"
  mkdir -p "$cache/.migrate"
  # the key AWX encrypts secrets in its database with: made with the database, kept with it
  [ -s "$cache/SECRET_KEY" ] || (umask 077; "$python" -c 'import secrets; print(secrets.token_urlsafe(48))' > "$cache/SECRET_KEY")
  "${VLLM_DR_VENV:-$root/.venv}/bin/python" "$root/tests/harness/awx.py" migrate --awx "$cache" --receptor "$receptor" \
    --dir "$cache/.migrate" --pg-bin "$pgbin" >&2 || die "migrating AWX's database failed (see above)"
  mv "$cache/.migrate/pgdata" "$cache/pgdata"
  rm -rf "$cache/.migrate"
  touch "$cache/pgdata/.complete"
  log "AWX database done in $((SECONDS - start)) s"
fi
echo "$cache"
