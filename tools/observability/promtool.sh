#!/usr/bin/env bash
# promtool, built from the Go module proxy once (see tools/go-tool.sh), then run with the arguments given.
#   bash tools/observability/promtool.sh check rules extensions/observability/prometheus/vllm-dr.rules.yml
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/observability/versions.env
source "$here/versions.env"

# remove_all_sd: without Prometheus's service-discovery plugins (cloud SDKs, Kubernetes client), which rule and
# metrics checks never use; the build is several times smaller.
GO_TOOL_TAGS=remove_all_sd exec bash "$here/../go-tool.sh" promtool github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION" -- "$@"
