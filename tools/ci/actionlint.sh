#!/usr/bin/env bash
# actionlint, built from the Go module proxy once into $VLLM_DR_K8S_CACHE (default ~/.cache/inferops-vllm-dr)
# /actionlint-<version>/bin, with Go's module and build caches beside it; then run with the arguments given.
#   bash tools/ci/actionlint.sh extensions/ci/github/vllm-dr-drill.yml
# Progress of a build goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/ci/versions.env
source "$here/versions.env"

root="${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}"
cache="$root/actionlint-${ACTIONLINT_VERSION}"
bin="$cache/bin"

die() { echo "actionlint build: $*" >&2; exit 1; }

if [[ ! -x "$bin/actionlint" ]]; then
    command -v go >/dev/null || die "go is not on PATH; install Go 1.26 or newer"
    mkdir -p "$bin"
    # One build at a time per cache: a second caller waits, then finds the binary there.
    exec 9>"$cache/.lock"
    flock 9
    if [[ ! -x "$bin/actionlint" ]]; then
        echo "actionlint build: github.com/rhysd/actionlint ${ACTIONLINT_VERSION} from the Go module proxy" >&2
        # Built into a scratch directory and moved in only when complete: an interrupted build leaves no half binary.
        stage="$(mktemp -d "$cache/.stage.XXXXXX")"
        trap 'rm -rf "$stage"' EXIT
        GOBIN="$stage" GOPATH="$root/go" GOCACHE="$root/go-build" GOMODCACHE="$root/go/pkg/mod" \
            CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" GOTOOLCHAIN=local \
            go install -ldflags "-s -w" "github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}" ||
            die "go install github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION} failed (see above)"
        mv -f "$stage/actionlint" "$bin/actionlint"
        rm -rf "$stage"
        trap - EXIT
    fi
    exec 9>&-
fi
exec "$bin/actionlint" "$@"
