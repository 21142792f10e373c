"""The manager side of a fleet of clusters: a connection per WorkerCluster, and one copy of
each job admitted onto a worker, created there (`docs/fleet.md`)."""
