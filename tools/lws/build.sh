#!/usr/bin/env bash
# Build the LeaderWorkerSet controller (sigs.k8s.io/lws) the Kubernetes suite runs on its control plane, once:
#   bin/lws-manager   the controller manager (cmd/ of the release)
#   crd/*.yaml        its CustomResourceDefinitions (config/crd/bases of the release, plain manifests)
#   webhook/*.yaml    its admission webhook configurations and their patches (config/webhook), which the suite points
#                     at the manager on the loopback (tests/harness/lws.py)
# from the release archive in ../shared/vendor (the Go module proxy does not serve sigs.k8s.io/lws itself; its
# dependencies come from the proxy), into $VLLM_DR_K8S_CACHE (default ~/.cache/inferops-vllm-dr)/lws-<version>-<hash>,
# <hash> naming the archive. A build already there is kept. Prints that directory on stdout; progress goes to stderr.
# VLLM_DR_LWS_ARCHIVE names another archive of the same release.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root_dir="$(cd "$here/../.." && pwd)"
# shellcheck source=tools/lws/versions.env
source "$here/versions.env"

log() { echo "lws build: $*" >&2; }
die() { echo "lws build: $*" >&2; exit 1; }

archive="${VLLM_DR_LWS_ARCHIVE:-$root_dir/../shared/vendor/lws-${LWS_VERSION}.tar.gz}"
[[ -f "$archive" ]] || die "$archive is missing; set VLLM_DR_LWS_ARCHIVE to the lws ${LWS_VERSION} release archive"
sum="$(sha256sum "$archive" | cut -c1-12)"
root="${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}"
cache="$root/lws-${LWS_VERSION}-$sum"

done_already() { [[ -x "$cache/bin/lws-manager" && -f "$cache/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml" &&
                   -f "$cache/webhook/manifests.yaml" ]]; }

if ! done_already; then
    command -v go >/dev/null || die "go is not on PATH; install Go 1.26 or newer"
    mkdir -p "$root"
    # One build at a time per archive: a second caller waits, then finds the build there.
    exec 9>"$root/.lws-${LWS_VERSION}-$sum.lock"
    flock 9
    if ! done_already; then
        start=$SECONDS
        # Unpacked and built in a scratch directory, moved in only when complete: an interrupted build leaves no half
        # build; the scratch directory of a killed one (no trap ran) is removed by the next, which holds the lock.
        chmod -R u+w "$root/.lws-${LWS_VERSION}-$sum".stage.* 2>/dev/null || true
        rm -rf "$root/.lws-${LWS_VERSION}-$sum".stage.*
        stage="$(mktemp -d "$root/.lws-${LWS_VERSION}-$sum.stage.XXXXXX")"
        trap 'chmod -R u+w "$stage" 2>/dev/null; rm -rf "$stage"' EXIT
        log "sigs.k8s.io/lws ${LWS_VERSION} from $(basename "$archive"), its dependencies from the Go module proxy"
        tar -xzf "$archive" -C "$stage" || die "could not unpack $archive"
        src="$stage/lws-${LWS_VERSION}"
        [[ -f "$src/go.mod" && -d "$src/cmd" && -d "$src/config/crd/bases" && -f "$src/config/webhook/manifests.yaml" ]] ||
            die "$archive is not the lws ${LWS_VERSION} release (no lws-${LWS_VERSION}/go.mod, cmd/, config/crd/bases/, config/webhook/)"
        mkdir -p "$stage/out/bin" "$stage/out/crd" "$stage/out/webhook"
        export GOPATH="$root/go" GOCACHE="$root/go-build" GOMODCACHE="$root/go/pkg/mod" \
            CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -buildvcs=false" GOTOOLCHAIN=local
        # `git archive` writes the commit it archived into the tar header; the manager reports it (--version).
        commit="$(gzip -dc "$archive" | git get-tar-commit-id 2>/dev/null || true)"
        pkg=sigs.k8s.io/lws/pkg/version
        (cd "$src" && go build -ldflags "-s -w -X $pkg.GitVersion=${LWS_VERSION} -X $pkg.GitCommit=${commit:-unknown}" \
            -o "$stage/out/bin/lws-manager" ./cmd) ||
            die "go build sigs.k8s.io/lws/cmd ${LWS_VERSION} failed (see above)"
        # The bases are plain CustomResourceDefinitions, used as they are: config/crd's kustomize patch only points
        # the CRD's conversion at the webhook service of an in-cluster deployment (one API version, nothing to convert).
        cp "$src"/config/crd/bases/*.yaml "$stage/out/crd/"
        cp "$src"/config/webhook/{manifests,mutating-patch,validating-patch}.yaml "$stage/out/webhook/"
        cp "$src/LICENSE" "$stage/out/"
        rm -rf "$cache"
        mv "$stage/out" "$cache"
        log "done in $((SECONDS - start)) s; $(du -sh "$cache" | cut -f1) in $cache"
    fi
    exec 9>&-
fi
echo "$cache"
