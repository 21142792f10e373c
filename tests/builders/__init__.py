"""One builder package for every test and benchmark, after Kueue's testing wrappers: short
calls with defaults, so a test states only what it is about.

- `builders.core`: core-model objects (nodes in racks and blocks, gangs, workloads, queues).
- `builders.world`: a cycle `World` that applies decisions the way the controller does.
- `builders.fairshare`: GPU-only fair-share divisions of a queue tree.
- `builders.scenario`: inline simulator scenarios and what their results say.
- `builders.kube`: Kubernetes objects as the API server stores them (ClusterQueue, Job...).

`tests/` is on the path of every test (pytest puts a rootless conftest's folder there);
benchmarks put it there themselves.
"""
