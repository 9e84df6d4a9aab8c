#!/usr/bin/env bash
# A real Kubernetes control plane on this machine for the Kubernetes suite: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler as local processes (kwokctl's binary runtime), with kwok
# standing in for the kubelets: it runs the pods of a fake node, serves `kubectl logs` from a file
# (ClusterLogs) and runs `kubectl exec` in a local directory (ClusterExec).
#
#   tools/k8s/cluster.sh up      build the binaries if needed (cached), create the cluster, print its kubeconfig path
#   tools/k8s/cluster.sh down    delete the cluster and its state
#   tools/k8s/cluster.sh status  print the kubeconfig path if the cluster answers, else exit 1
#
# VLLM_DR_K8S_NAME names the cluster (default vllm-dr); its state lives under VLLM_DR_K8S_STATE
# (default ~/.cache/inferops-vllm-dr/clusters). All ports are free ports picked by kwokctl, and every component
# listens on 127.0.0.1 only (kwokctl.yaml: kwokctl's own default is every address).
# VLLM_DR_K8S_AUDIT_POLICY, when set, names an audit policy file: the API server then writes an audit log
# (clusters/<name>/logs/audit.log under the state directory); make bench-k8s counts API calls from it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="${VLLM_DR_K8S_NAME:-vllm-dr}"
state="${VLLM_DR_K8S_STATE:-$HOME/.cache/inferops-vllm-dr/clusters}"
export KWOK_WORKDIR="$state"
kubeconfig="$state/$name.kubeconfig"
creating_dir="${XDG_CACHE_HOME:-$HOME/.cache}/inferops-vllm-dr"

die() { echo "k8s cluster: $*" >&2; exit 1; }

kwokctl() { "$bin/kwokctl" --config "$here/kwokctl.yaml" --name "$name" "$@"; }

answers() {
    [[ -f "$kubeconfig" ]] && "$bin/kubectl" --kubeconfig "$kubeconfig" --request-timeout 5s get --raw /readyz >/dev/null 2>&1
}

up() {
    if answers; then echo "$kubeconfig"; return 0; fi
    # A cluster left behind by a killed run: remove it before creating a new one of the same name.
    kwokctl delete cluster >/dev/null 2>&1 || true
    mkdir -p "$state" "$creating_dir"
    # kwokctl picks each component's port as one free now, and binds it later: two clusters created at the same time
    # (a suite and a bench, two suites) pick the same ports. Creations on this machine take turns; a cluster's ports
    # are bound once it answers, so the next one picks others. (-o: the cluster's processes do not hold the lock.)
    # kwokctl writes its own kubeconfig; this one is the cluster's alone, so the user's ~/.kube/config is untouched.
    flock -o "$creating_dir/cluster-create.lock" \
      "$bin/kwokctl" --config "$here/kwokctl.yaml" --name "$name" create cluster --runtime binary \
        --kubeconfig "$kubeconfig" \
        --kube-apiserver-binary "$bin/kube-apiserver" \
        --kube-controller-manager-binary "$bin/kube-controller-manager" \
        --kube-scheduler-binary "$bin/kube-scheduler" \
        --kwok-controller-binary "$bin/kwok" \
        --etcd-binary "$bin/etcd" \
        --enable-crds ClusterLogs,ClusterExec,Logs,Exec \
        ${VLLM_DR_K8S_AUDIT_POLICY:+--kube-audit-policy "$VLLM_DR_K8S_AUDIT_POLICY"} \
        --wait 120s >&2 || die "kwokctl create cluster failed (see above); logs in $state/clusters/$name/logs"
    # The node the pods land on; kwok manages nodes that carry this annotation.
    "$bin/kubectl" --kubeconfig "$kubeconfig" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
    "$bin/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready node/kwok-node-0 --timeout=60s >&2 ||
        die "the kwok node did not become Ready"
    echo "$kubeconfig"
}

down() {
    kwokctl delete cluster >&2 || true
    rm -f "$kubeconfig"
}

bin="$(bash "$here/build.sh")"
export PATH="$bin:$PATH"
case "${1:-}" in
    up) up ;;
    down) down ;;
    status) answers && echo "$kubeconfig" ;;
    *) die "usage: $0 up|down|status" ;;
esac
