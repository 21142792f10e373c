"""Objects and a JSON patch applier shared by the tests of each job kind."""

import copy

from admitter.jobs.interface import nested

GPU = "nvidia.com/gpu"
OWN = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}
RACK = {"topology.admitter.dev/rack": "rack-2"}


def pod_template(gpus: int, affinity: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}],
                  "initContainers": [{"name": "side", "restartPolicy": "Always",
                                      "resources": {"requests": {"cpu": "1"}}}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"spec": spec}


def apply(obj: dict, ops: list[dict]) -> dict:
    """A minimal JSON patch (add/copy/remove on existing parents), as the API server applies
    it."""
    out = copy.deepcopy(obj)
    for op in ops:
        steps = _steps(op["path"])
        parent = nested(out, steps[:-1])
        key = int(steps[-1]) if isinstance(parent, list) else steps[-1]
        if op["op"] == "add":
            parent[key] = op["value"]
        elif op["op"] == "copy":
            parent[key] = copy.deepcopy(nested(out, _steps(op["from"])))
        else:
            del parent[key]
    return out


def _steps(pointer: str) -> list[str]:
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]]
