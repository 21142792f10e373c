#!/usr/bin/env bash
# Builds the Helm CLI from the pinned module in hack/helm/go.mod into
# hack/bin/helm-<version>/helm (git-ignored), unless it is there, then prints the binary's path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
helm="../bin/helm-$(go list -m -f '{{.Version}}' helm.sh/helm/v4)/helm"

# Built in the background by `make test` while the first tests run (as the operators are):
# a test that needs it meanwhile waits on the lock for that build.
mkdir -p ../bin
exec 9>../bin/.helm.lock
flock 9
if [[ ! -x "${helm}" ]]; then
  started=${SECONDS}
  mkdir -p "$(dirname "${helm}")"
  CGO_ENABLED=0 go build -trimpath -mod=readonly -buildvcs=false -ldflags "-s -w" \
    -o "${helm}.tmp" helm.sh/helm/v4/cmd/helm
  mv "${helm}.tmp" "${helm}"
  echo "built ${helm#../} in $((SECONDS - started))s" >&2
fi
echo "$(cd "$(dirname "${helm}")" && pwd -P)/helm"
