#!/usr/bin/env bash
# Build the control plane the Kubernetes suite runs on, from the Go module proxy, once:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes, through a wrapper go.mod)
#   etcd                                                               (go.etcd.io/etcd/server/v3, through a wrapper)
#   kwok, kwokctl                                                      (sigs.k8s.io/kwok, plus kwok-exec-stdin-eof.patch)
# into $VLLM_DR_K8S_CACHE (default ~/.cache/inferops-vllm-dr)/k8s-<version>/bin. A binary already there is kept, so a
# fresh clone on the same machine builds nothing. Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/k8s/versions.env
source "$here/versions.env"

cache="${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}/k8s-${K8S_VERSION}"
bin="$cache/bin"
mkdir -p "$bin" "$cache/src"

log() { echo "k8s build: $*" >&2; }
die() { echo "k8s build: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 or newer, or set KUBECONFIG to use an existing cluster"

# One build at a time per cache: a second caller waits, then finds the binaries there.
exec 9>"$cache/.lock"
flock 9

export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" GOTOOLCHAIN=local

# Built into a scratch directory and moved in only when complete: an interrupted build leaves no half binary.
stage="$(mktemp -d "$cache/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

have() {
    local name
    for name in "$@"; do [[ -x "$bin/$name" ]] || return 1; done
}

install_staged() {
    local name
    for name in "$@"; do mv -f "$stage/$name" "$bin/$name"; done
}

build_kubernetes() {
    local src="$cache/src/kubernetes" gomod minor ldflags pkg
    have kube-apiserver kube-controller-manager kube-scheduler kubectl && return 0
    log "kubernetes ${K8S_VERSION}: resolving the module graph"
    mkdir -p "$src"
    gomod="$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
    [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@${K8S_VERSION} from the Go module proxy"
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging/...; a dependent module
    # must replace each with the published v0.<minor>.<patch> of the same release.
    minor="v0${K8S_VERSION#v1}"
    {
        echo "module inferops.local/k8s-control-plane"
        echo
        echo "go 1.26.0"
        echo
        echo "require k8s.io/kubernetes ${K8S_VERSION}"
        echo
        echo "replace ("
        awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u |
            while read -r mod; do echo "	$mod => $mod $minor"; done
        echo ")"
        echo
        echo "tool ("
        for pkg in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
            echo "	k8s.io/kubernetes/cmd/$pkg"
        done
        echo ")"
    } >"$src/go.mod"
    (cd "$src" && go mod tidy) || die "go mod tidy failed for k8s.io/kubernetes@${K8S_VERSION} (see above)"
    local v="${K8S_VERSION}" date
    date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    ldflags="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$v" | cut -d. -f2)"
        ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
    done
    for pkg in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
        have "$pkg" && continue
        log "building $pkg ${K8S_VERSION}"
        (cd "$src" && go build -ldflags "$ldflags" -o "$stage/$pkg" "k8s.io/kubernetes/cmd/$pkg") ||
            die "go build k8s.io/kubernetes/cmd/$pkg@${K8S_VERSION} failed (see above)"
        install_staged "$pkg"
    done
}

build_etcd() {
    local src="$cache/src/etcd"
    have etcd && [[ -f "$cache/.etcd-${ETCD_VERSION}" ]] && return 0
    log "building etcd ${ETCD_VERSION}"
    mkdir -p "$src"
    cat >"$src/go.mod" <<EOF
module inferops.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
EOF
    cat >"$src/main.go" <<'EOF'
// etcd built from its server module: the same entry point as the etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
    (cd "$src" && go mod tidy && go build -ldflags "-s -w" -o "$stage/etcd" .) ||
        die "building etcd ${ETCD_VERSION} from go.etcd.io/etcd/server/v3 failed (see above)"
    install_staged etcd
    touch "$cache/.etcd-${ETCD_VERSION}"
}

build_kwok() {
    local src="$cache/src/kwok" dir stamp patch_sum
    patch_sum="$(sha256sum "$here/kwok-exec-stdin-eof.patch" | cut -c1-12)"
    stamp="$cache/.kwok-${KWOK_VERSION}-$patch_sum"
    have kwok kwokctl && [[ -f "$stamp" ]] && return 0
    log "building kwok, kwokctl ${KWOK_VERSION} (with kwok-exec-stdin-eof.patch)"
    dir="$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "$dir" ]] || die "could not download sigs.k8s.io/kwok@${KWOK_VERSION} from the Go module proxy"
    rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
    patch -s -p1 -d "$src" <"$here/kwok-exec-stdin-eof.patch" || die "kwok-exec-stdin-eof.patch does not apply to kwok ${KWOK_VERSION}"
    local kube="${K8S_VERSION#v}"
    (cd "$src" && go build \
        -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$kube" \
        -o "$stage/" ./cmd/kwok ./cmd/kwokctl) ||
        die "building sigs.k8s.io/kwok/cmd/{kwok,kwokctl}@${KWOK_VERSION} failed (see above)"
    install_staged kwok kwokctl
    rm -f "$cache"/.kwok-*
    touch "$stamp"
}

start=$SECONDS
build_etcd
build_kwok
build_kubernetes
if (( SECONDS - start > 1 )); then
    log "done in $((SECONDS - start)) s; $(du -sh "$cache" | cut -f1) in $cache"
fi
echo "$bin"
