#!/usr/bin/env bash
# JobSet's controller manager into hack/bin/jobset-<version>/manager; prints its module's
# directory (CRDs, webhook manifests).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../go-operator.sh" jobset sigs.k8s.io/jobset
