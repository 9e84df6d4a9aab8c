#!/usr/bin/env bash
# A Go command-line tool, built from the Go module proxy once into $VLLM_DR_K8S_CACHE (default
# ~/.cache/inferops-vllm-dr)/<name>-<version>/bin, with Go's module and build caches beside it; then run with the
# arguments after --. Progress of a build goes to stderr. GO_TOOL_TAGS: build tags for the build. GO_TOOL_BUILD: a
# shell command that builds NAME into the current directory instead of `go install PACKAGE@VERSION` (run with Go's
# caches set as for go install), for a tool that is generated rather than installed.
#   bash tools/go-tool.sh actionlint github.com/rhysd/actionlint/cmd/actionlint v1.7.12 -- -version
set -euo pipefail

[[ $# -ge 4 && "$4" == "--" ]] || { echo "usage: go-tool.sh NAME PACKAGE VERSION -- ARGS..." >&2; exit 2; }
name="$1" package="$2" version="$3"
shift 4
# Read once and kept from the children: a GO_TOOL_BUILD that runs go-tool.sh for another tool (the collector's build
# runs the builder's) would otherwise build that tool with this build command too, and wait for its own lock forever.
build_command="${GO_TOOL_BUILD:-}" build_tags="${GO_TOOL_TAGS:-}"
unset GO_TOOL_BUILD GO_TOOL_TAGS

root="${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}"
cache="$root/${name}-${version}"
bin="$cache/bin"

die() { echo "$name build: $*" >&2; exit 1; }

if [[ ! -x "$bin/$name" ]]; then
    command -v go >/dev/null || die "go is not on PATH; install Go 1.26 or newer"
    mkdir -p "$bin"
    # One build at a time per cache: a second caller waits, then finds the binary there.
    exec 9>"$cache/.lock"
    flock 9
    if [[ ! -x "$bin/$name" ]]; then
        echo "$name build: $package $version from the Go module proxy" >&2
        start=$SECONDS
        # Built into a scratch directory and moved in only when complete: an interrupted build leaves no half binary.
        stage="$(mktemp -d "$cache/.stage.XXXXXX")"
        trap 'rm -rf "$stage"' EXIT
        export GOBIN="$stage" GOPATH="$root/go" GOCACHE="$root/go-build" GOMODCACHE="$root/go/pkg/mod" \
            CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -buildvcs=false" GOTOOLCHAIN=local
        if [[ -n "$build_command" ]]; then
            (cd "$stage" && bash -c "$build_command" >&2) || die "building $package $version failed (see above)"
        else
            go install ${build_tags:+-tags "$build_tags"} -ldflags "-s -w" "$package@$version" ||
                die "go install $package@$version failed (see above)"
        fi
        mv -f "$stage/$name" "$bin/$name"
        rm -rf "$stage"
        trap - EXIT
        echo "$name build: done in $((SECONDS - start)) s" >&2
    fi
    exec 9>&-
fi
exec "$bin/$name" "$@"
