#!/usr/bin/env bash
# The OpenTelemetry Collector of the log-to-alert path, built once with the collector builder from the Go module proxy
# (extensions/observability/otelcol/builder-config.yml, at versions.env's OTELCOL_VERSION) and cached by
# tools/go-tool.sh as otelcol-vllm-dr-<version>-<manifest digest>; then run with the arguments given.
#   bash tools/observability/otelcol.sh --config extensions/observability/otelcol/vllm-dr.yaml
#   bash tools/observability/otelcol.sh components
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/observability/versions.env
source "$here/versions.env"
manifest="$(cd "$here/../.." && pwd)/extensions/observability/otelcol/builder-config.yml"
name=otelcol-vllm-dr

# A contrib component at another version than the builder's pulls a mismatched collector core into the build.
stray="$(grep -E '^ *- gomod: github.com/open-telemetry/opentelemetry-collector-contrib/' "$manifest" |
    grep -v -E " ${OTELCOL_VERSION//./\\.}\$" || true)"
if [[ -n "$stray" ]]; then
    echo "$name build: a component in $manifest is not at OTELCOL_VERSION $OTELCOL_VERSION (versions.env): $stray;" \
        "put both at one version" >&2
    exit 1
fi

# The builder (itself cached by go-tool.sh) writes the sources and the binary under the manifest's relative
# output_path, here the build's scratch directory. The manifest's digest in the version: a changed component list
# builds anew instead of running a stale binary.
build="bash '$here/../go-tool.sh' builder go.opentelemetry.io/collector/cmd/builder '$OTELCOL_VERSION' -- --config '$manifest'"
# the directory has the binary's name: the binary moves out, the sources go
build+=" && mv $name/$name $name.bin && rm -rf $name && mv $name.bin $name"
GO_TOOL_BUILD="$build" exec bash "$here/../go-tool.sh" "$name" "$manifest" \
    "$OTELCOL_VERSION-$(sha256sum "$manifest" | cut -c1-12)" -- "$@"
