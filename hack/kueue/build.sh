#!/usr/bin/env bash
# Builds Kueue's scheduler-performance runner and minimalkueue from the pinned module in
# hack/kueue/go.mod into hack/bin/kueue-<version>/ (git-ignored), skipping what exists.
# Kueue's CRDs come from the same module version: see crds_dir below.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="$(awk '$1 == "sigs.k8s.io/kueue" && $2 ~ /^v/ {print $2; exit}' "${HERE}/go.mod")"
OUT="${HERE}/../bin/kueue-${VERSION}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly -buildvcs=false"

if [[ -x "${OUT}/runner" && -x "${OUT}/minimalkueue" ]]; then
  echo "up to date: bin/kueue-${VERSION}"
else
  mkdir -p "${OUT}"
  t0=${SECONDS}
  (cd "${HERE}" && go build -ldflags "-s -w" -o "${OUT}/" \
    sigs.k8s.io/kueue/test/performance/scheduler/runner \
    sigs.k8s.io/kueue/test/performance/scheduler/minimalkueue)
  echo "built runner minimalkueue into bin/kueue-${VERSION} in $((SECONDS - t0))s"
fi
# The CRDs and the baseline config, from the module cache (read-only, verified by go.sum).
(cd "${HERE}" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
