#!/usr/bin/env bash
# Builds the local control-plane binaries (Kubernetes, etcd, KWOK) from the pinned Go wrapper
# modules into hack/bin/<component>-<version>/. Existing binaries are kept, so a warm run is a
# no-op; compile work is shared through Go's normal module and build caches.
# Kubernetes comes from hack/kube/ (the newest supported minor) unless KUBE_MODULE names another
# wrapper module directory: `KUBE_MODULE=kube-1.34 bash hack/build.sh` builds the oldest.
set -euo pipefail

HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${HACK}/bin"
export CGO_ENABLED=0
# -trimpath keeps paths out of the binaries; readonly: go.mod/go.sum are committed and complete.
export GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly -buildvcs=false"

# version MODULE_DIR MODULE -> the version that MODULE_DIR/go.mod pins for MODULE.
version() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' \
    "${HACK}/$1/go.mod"
}

# build MODULE_DIR OUT_DIR LDFLAGS BINARY=PACKAGE... builds the missing binaries in one go
# invocation, so packages shared between them are compiled once.
build() {
  local dir="$1" out="$2" ldflags="$3" missing=() pkgs=() spec
  shift 3
  for spec in "$@"; do
    if [[ ! -x "${out}/${spec%%=*}" ]]; then
      missing+=("${spec%%=*}")
      pkgs+=("${spec#*=}")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "up to date: ${out#"${HACK}/"}"
    return
  fi
  echo "building ${missing[*]} into ${out#"${HACK}/"}"
  local tmp="${out}.tmp"
  rm -rf "${tmp}" && mkdir -p "${tmp}" "${out}"
  local t0=${SECONDS}
  (cd "${HACK}/${dir}" && go build -ldflags "${ldflags}" -o "${tmp}/" "${pkgs[@]}")
  local name
  for name in "${missing[@]}"; do
    [[ -x "${tmp}/${name}" ]] || { echo "expected ${tmp}/${name} after build" >&2; exit 1; }
    mv "${tmp}/${name}" "${out}/${name}"
  done
  rm -rf "${tmp}"
  echo "built ${missing[*]} in $((SECONDS - t0))s"
}

KUBE_MODULE="${KUBE_MODULE:-kube}"
if [[ ! -f "${HACK}/${KUBE_MODULE}/go.mod" ]]; then
  echo "KUBE_MODULE=${KUBE_MODULE}: hack/${KUBE_MODULE}/go.mod does not exist" \
    "(Kubernetes wrapper modules: $(cd "${HACK}" && echo kube/go.mod kube-*/go.mod))" >&2
  exit 2
fi
KUBE="$(version "${KUBE_MODULE}" k8s.io/kubernetes)"
ETCD="$(version etcd go.etcd.io/etcd/server/v3)"
KWOK="$(version kwok sigs.k8s.io/kwok)"

kube_ldflags="-s -w"
minor="${KUBE#v*.}"
minor="${minor%%.*}"
major="${KUBE#v}"
major="${major%%.*}"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X ${pkg}.gitVersion=${KUBE} -X ${pkg}.gitMajor=${major}"
  kube_ldflags+=" -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean -X ${pkg}.gitCommit="
done

start=${SECONDS}
build "${KUBE_MODULE}" "${BIN}/kube-${KUBE}" "${kube_ldflags}" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl=k8s.io/kubernetes/cmd/kubectl
build etcd "${BIN}/etcd-${ETCD}" "-s -w" etcd=.
build kwok "${BIN}/kwok-${KWOK}" "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK#v}" \
  kwok=sigs.k8s.io/kwok/cmd/kwok
echo "hack/build.sh done in $((SECONDS - start))s"
