#!/usr/bin/env bash
# Kubeflow Trainer's controller manager into hack/bin/trainer-<version>/manager; prints its
# module's directory (CRDs and runtimes under manifests/base).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../go-operator.sh" trainer \
  github.com/kubeflow/trainer/v2 github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
