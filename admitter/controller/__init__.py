"""The controller: informers, the reconcile loop, decisions applied to Jobs and Workloads."""
