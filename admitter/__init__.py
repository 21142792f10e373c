"""admitter: a GPU-aware admission controller for Kubernetes."""
