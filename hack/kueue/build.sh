#!/usr/bin/env bash
# Builds Kueue binaries from the pinned module in hack/kueue/go.mod into
# hack/bin/kueue-<version>/ (git-ignored), skipping what exists, then prints the module's
# directory in Go's module cache (Kueue's CRDs and configs, verified by go.sum).
#   usage: build.sh [runner] [minimalkueue] [kueue]
# With no argument: the scheduler-performance `runner` and `minimalkueue` (the side-by-side
# benchmark). `kueue` is Kueue's full manager (cmd/kueue, MultiKueue included; ~200 s cold on
# the 2-core machine), which only benchmarks/bench_fleet.py's multikueue way asks for.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="$(awk '$1 == "sigs.k8s.io/kueue" && $2 ~ /^v/ {print $2; exit}' "${HERE}/go.mod")"
OUT="${HERE}/../bin/kueue-${VERSION}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly -buildvcs=false"

declare -A PACKAGES=(
  [runner]=sigs.k8s.io/kueue/test/performance/scheduler/runner
  [minimalkueue]=sigs.k8s.io/kueue/test/performance/scheduler/minimalkueue
  [kueue]=sigs.k8s.io/kueue/cmd/kueue
)
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(runner minimalkueue)

missing=()
for name in "${wanted[@]}"; do
  [[ -n "${PACKAGES[${name}]:-}" ]] || { echo "unknown binary: ${name}" >&2; exit 2; }
  [[ -x "${OUT}/${name}" ]] || missing+=("${name}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "up to date: bin/kueue-${VERSION} (${wanted[*]})"
else
  mkdir -p "${OUT}"
  t0=${SECONDS}
  for name in "${missing[@]}"; do  # one at a time: `go build -o DIR/` names it after its package
    (cd "${HERE}" && go build -ldflags "-s -w" -o "${OUT}/${name}.tmp" "${PACKAGES[${name}]}")
    mv "${OUT}/${name}.tmp" "${OUT}/${name}"
  done
  echo "built ${missing[*]} into bin/kueue-${VERSION} in $((SECONDS - t0))s"
fi
# The CRDs and the baseline config, from the module cache (read-only, verified by go.sum).
(cd "${HERE}" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
