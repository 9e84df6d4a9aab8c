#!/usr/bin/env bash
# promtool, built from the Go module proxy once (see tools/go-tool.sh), then run with the arguments given.
#   bash tools/observability/promtool.sh check rules extensions/observability/prometheus/vllm-dr.rules.yml
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/observability/versions.env
source "$here/versions.env"

exec bash "$here/../go-tool.sh" promtool github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION" -- "$@"
