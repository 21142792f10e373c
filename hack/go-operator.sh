#!/usr/bin/env bash
# Builds one operator's manager from the module pinned in hack/<dir>/go.mod into
# hack/bin/<dir>-<version>/manager (git-ignored), unless it is there, then prints the module's
# directory in Go's module cache (its CRDs and manifests, verified by go.sum).
#   usage: go-operator.sh <dir under hack/> <module path> [<main package, default the module>]
set -euo pipefail
dir="$1" module="$2" package="${3:-$2}"
cd "$(dirname "${BASH_SOURCE[0]}")/${dir}"
module_dir="$(go list -m -f '{{.Dir}}' "${module}")"
manager="../bin/${dir}-$(go list -m -f '{{.Version}}' "${module}")/manager"

# `make test` builds the operators in the background while the first tests run, and a test
# that needs one runs this too: the lock makes the second wait for the first's build.
mkdir -p ../bin
exec 9>"../bin/.${dir}.lock"
flock 9
if [[ ! -x "${manager}" ]]; then
  started=${SECONDS}
  mkdir -p "$(dirname "${manager}")"
  CGO_ENABLED=0 go build -trimpath -mod=readonly -buildvcs=false -ldflags "-s -w" \
    -o "${manager}.tmp" "${package}"
  mv "${manager}.tmp" "${manager}"
  echo "built ${manager#../} in $((SECONDS - started))s" >&2
fi
echo "${module_dir}"
