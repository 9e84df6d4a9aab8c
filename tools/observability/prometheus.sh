#!/usr/bin/env bash
# Prometheus itself, at promtool's version, built from the Go module proxy once (see tools/go-tool.sh), then run with
# the arguments given. The end-to-end alert test (tests/functional/observability/test_alert_path_lab.py) runs it.
#   bash tools/observability/prometheus.sh --config.file=prometheus.yml --web.listen-address=127.0.0.1:9090
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/observability/versions.env
source "$here/versions.env"

# remove_all_sd as for promtool: the test scrapes static targets. Without the builtinassets tag the web UI's assets
# are not embedded (the UI answers that they are missing); the HTTP API, all the test reads, is complete.
GO_TOOL_TAGS=remove_all_sd exec bash "$here/../go-tool.sh" prometheus github.com/prometheus/prometheus/cmd/prometheus "$PROMETHEUS_VERSION" -- "$@"
