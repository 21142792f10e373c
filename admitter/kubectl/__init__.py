"""`kubectl admitter`: why a workload waits and how each queue's budget is used, read from
the objects the controller writes (with the caller's kubeconfig, so their RBAC applies)."""
