#!/usr/bin/env bash
# Builds JobSet's controller manager from the pinned module in hack/jobset/go.mod into
# hack/bin/jobset-<version>/ (git-ignored), skipping what exists, then prints the module's
# directory in Go's module cache (the CRDs and webhook manifests, verified by go.sum).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="$(awk '$1 == "sigs.k8s.io/jobset" && $2 ~ /^v/ {print $2; exit}' "${HERE}/go.mod")"
OUT="${HERE}/../bin/jobset-${VERSION}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly -buildvcs=false"

if [[ -x "${OUT}/manager" ]]; then
  echo "up to date: bin/jobset-${VERSION}" >&2
else
  mkdir -p "${OUT}"
  t0=${SECONDS}
  (cd "${HERE}" && go build -ldflags "-s -w" -o "${OUT}/manager.tmp" sigs.k8s.io/jobset)
  mv "${OUT}/manager.tmp" "${OUT}/manager"
  echo "built manager into bin/jobset-${VERSION} in $((SECONDS - t0))s" >&2
fi
(cd "${HERE}" && go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)
