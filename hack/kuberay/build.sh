#!/usr/bin/env bash
# KubeRay's operator into hack/bin/kuberay-<version>/manager; prints its module's directory
# (the RayCluster and RayJob CRDs under config/crd/bases).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../go-operator.sh" kuberay \
  github.com/ray-project/kuberay/ray-operator
