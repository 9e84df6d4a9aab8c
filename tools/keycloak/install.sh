#!/usr/bin/env bash
# Keycloak's Quarkus distribution, fetched from Maven Central with the machine's mvn once into
# $VLLM_DR_K8S_CACHE (default ~/.cache/inferops-vllm-dr)/keycloak-<version>, then its home directory printed.
# A second caller waits for the first; an interrupted install leaves nothing half unpacked.
#   bash tools/keycloak/install.sh      -> /home/me/.cache/inferops-vllm-dr/keycloak-26.5.6
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
. "$here/versions.env"
version="${KEYCLOAK_VERSION}"
root="${VLLM_DR_K8S_CACHE:-$HOME/.cache/inferops-vllm-dr}"
home="$root/keycloak-${version}"

die() { echo "keycloak install: $*" >&2; exit 1; }

if [[ ! -x "$home/bin/kc.sh" ]]; then
    command -v mvn >/dev/null || die "mvn is not on PATH; install Maven (Debian: apt-get install maven)"
    command -v unzip >/dev/null || die "unzip is not on PATH; install it (Debian: apt-get install unzip)"
    mkdir -p "$root"
    exec 9>"$root/.keycloak-${version}.lock"
    flock 9
    if [[ ! -x "$home/bin/kc.sh" ]]; then
        echo "keycloak install: org.keycloak:keycloak-quarkus-dist:${version}:zip from Maven Central" >&2
        start=$SECONDS
        stage="$(mktemp -d "$root/.keycloak-stage.XXXXXX")"
        trap 'rm -rf "$stage"' EXIT
        mvn -q -B dependency:copy -Dartifact="org.keycloak:keycloak-quarkus-dist:${version}:zip" \
            -DoutputDirectory="$stage" -Dmdep.useBaseVersion=true >&2 ||
            die "mvn dependency:copy of keycloak-quarkus-dist ${version} failed (see above)"
        unzip -q "$stage/keycloak-quarkus-dist-${version}.zip" -d "$stage/unpacked" ||
            die "unzipping keycloak-quarkus-dist-${version}.zip failed"
        [[ -x "$stage/unpacked/keycloak-${version}/bin/kc.sh" ]] || die "the zip holds no keycloak-${version}/bin/kc.sh"
        mv "$stage/unpacked/keycloak-${version}" "$home"
        rm -rf "$stage"
        trap - EXIT
        echo "keycloak install: done in $((SECONDS - start)) s" >&2
    fi
    exec 9>&-
fi
echo "$home"
