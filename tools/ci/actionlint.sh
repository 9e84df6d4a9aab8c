#!/usr/bin/env bash
# actionlint, built from the Go module proxy once (see tools/go-tool.sh), then run with the arguments given.
#   bash tools/ci/actionlint.sh extensions/ci/github/vllm-dr-drill.yml
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/ci/versions.env
source "$here/versions.env"

exec bash "$here/../go-tool.sh" actionlint github.com/rhysd/actionlint/cmd/actionlint "$ACTIONLINT_VERSION" -- "$@"
