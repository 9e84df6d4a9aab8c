#!/usr/bin/env bash
# The OpenTelemetry Collector of the log-to-alert path, built once with the collector builder from the Go module proxy
# (extensions/observability/otelcol/builder-config.yml, at versions.env's OTELCOL_VERSION) into $VLLM_DR_K8S_CACHE
# (default ~/.cache/inferops-vllm-dr)/otelcol-vllm-dr-<version>-<manifest digest>/bin; then run with the arguments given.
#   bash tools/observability/otelcol.sh --config extensions/observability/otelcol/vllm-dr.yaml
#   bash tools/observability/otelcol.sh components
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/observability/versions.env
source "$here/versions.env"
manifest="$(cd "$here/../.." && pwd)/extensions/observability/otelcol/builder-config.yml"
name=otelcol-vllm-dr

die() { echo "$name build: $*" >&2; exit 1; }

# A contrib component at another version than the builder's pulls a mismatched collector core into the build.
stray="$(grep -E '^ *- gomod: github.com/open-telemetry/opentelemetry-collector-contrib/' "$manifest" |
    grep -v -E " ${OTELCOL_VERSION//./\\.}\$" || true)"
[[ -z "$stray" ]] || die "a component in $manifest is not at OTELCOL_VERSION $OTELCOL_VERSION (versions.env): $stray; put both at one version"

root="${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}"
# The manifest's digest in the name: a changed component list builds anew instead of running a stale binary.
cache="$root/$name-$OTELCOL_VERSION-$(sha256sum "$manifest" | cut -c1-12)"
bin="$cache/bin"

if [[ ! -x "$bin/$name" ]]; then
    # The builder itself, cached by go-tool.sh like any other Go tool.
    bash "$here/../go-tool.sh" builder go.opentelemetry.io/collector/cmd/builder "$OTELCOL_VERSION" -- version >&2
    mkdir -p "$bin"
    exec 9>"$cache/.lock"
    flock 9
    if [[ ! -x "$bin/$name" ]]; then
        echo "$name build: the collector builder $OTELCOL_VERSION on $manifest" >&2
        start=$SECONDS
        stage="$(mktemp -d "$cache/.stage.XXXXXX")"
        trap 'rm -rf "$stage"' EXIT
        # The manifest's output_path is relative: the sources and the binary land in the scratch directory.
        (cd "$stage" && GOPATH="$root/go" GOCACHE="$root/go-build" GOMODCACHE="$root/go/pkg/mod" CGO_ENABLED=0 \
            GOFLAGS="-trimpath -buildvcs=false" GOTOOLCHAIN=local \
            "$root/builder-$OTELCOL_VERSION/bin/builder" --config "$manifest" >&2) ||
            die "the collector builder failed (see above)"
        mv -f "$stage/$name/$name" "$bin/$name"
        rm -rf "$stage"
        trap - EXIT
        echo "$name build: done in $((SECONDS - start)) s" >&2
    fi
    exec 9>&-
fi
exec "$bin/$name" "$@"
