#!/usr/bin/env bash
# Builds JobSet's controller manager from the pinned module in hack/jobset/go.mod into
# hack/bin/jobset-<version>/manager (git-ignored), unless it is there, then prints the
# module's directory in Go's module cache (its CRD and webhook manifests, verified by go.sum).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
module_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)"
manager="../bin/jobset-$(go list -m -f '{{.Version}}' sigs.k8s.io/jobset)/manager"

if [[ ! -x "${manager}" ]]; then
  started=${SECONDS}
  mkdir -p "$(dirname "${manager}")"
  CGO_ENABLED=0 go build -trimpath -mod=readonly -buildvcs=false -ldflags "-s -w" \
    -o "${manager}.tmp" sigs.k8s.io/jobset
  mv "${manager}.tmp" "${manager}"
  echo "built ${manager#../} in $((SECONDS - started))s" >&2
fi
echo "${module_dir}"
