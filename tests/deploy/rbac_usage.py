"""Which API requests `admitter run` can make, read from its source: every (group, resource,
verb) triple, so deploy/rbac.yaml can be compared with what the code really does.

Requests leave the process three ways, and each is read where it is written:
- through `Kube` (admitter/kube/client.py): a call `<...>.kube.<method>(KIND, ...)`; the
  kind may be a constant, a parameter (followed to every call of its function), an
  attribute set from one (`self.kind`, followed to the constructor's calls) or a job kind's
  resource (`resource_of(...)`: every kind admitter can suspend; its status only for kinds
  that clear a start time, `ClearsStartTime`);
- through kubernetes_asyncio's `CustomObjectsApi` (the webhooks' lookups): the method name
  gives the verb, the `<Kind>.plural` argument the resource;
- through kubernetes_asyncio's typed APIs (`read_priority_class`): TYPED_REQUESTS maps each
  method used to its triple; a typed request method not in it is an error;
`admitter/webhook/registration.py` (`admitter run --webhook-url-host`) is left out: it runs
only outside the cluster, with the kubeconfig of the admin who starts it (docs/webhooks.md);
the install check uses only its rendering, and reads the configurations through informers.
Anything the reader cannot attribute is an error, so new code cannot hide a request.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kubernetes_asyncio import client as typed_client

from admitter.api.base import GROUP, Resource
from admitter.jobs.interface import ClearsStartTime, ReadsRuntimes
from admitter.jobs.registry import SUSPENDABLE
from admitter.jobs.workloads import resource_of, runtime_resource
from admitter.kube import client as kube
from admitter.webhook.resources import KINDS

ROOT = Path(__file__).parents[2] / "admitter"
ENTRY = "admitter.commands.run"
Triple = tuple[str, str, str]

KUBE_VERBS = {"get": "get", "list": "list", "watch": "watch", "create": "create",
              "patch": "patch", "delete": "delete", "replace": "update"}
"""Kube's request-making methods and the RBAC verb each one needs."""
CLIENT_VERBS = {"read": "get", "get": "get", "list": "list", "create": "create", "patch": "patch",
                "replace": "update", "delete": "delete"}
"""kubernetes_asyncio method prefixes (`list_cluster_custom_object`, `read_namespaced_lease`)."""
TYPED_REQUESTS: dict[str, Triple] = {
    "read_priority_class": ("scheduling.k8s.io", "priorityclasses", "get"),
    "read_namespace": ("", "namespaces", "get"),
    "read_namespaced_resource_claim_template": ("resource.k8s.io", "resourceclaimtemplates",
                                                "get"),
}
"""Typed-API methods the code calls, with the request each makes."""
ADMIN_ONLY = {"admitter.webhook.registration"}
"""Modules whose requests run with an admin's credentials outside the cluster, not the
ServiceAccount's."""
WORKER_SIDE = {"admitter.fleet.worker", "admitter.fleet.dispatch"}
"""Modules whose requests go to the worker clusters of a fleet, with the credentials of the
kubeconfig each WorkerCluster names (deploy/fleet-worker/rbac.yaml), not the manager's."""
KIND_CONSTANTS = {name: value for name, value in vars(kube).items()
                  if isinstance(value, kube.Kind)}
RESOURCE_CLASSES: dict[str, type[Resource]] = {kind.__name__: kind for kind in KINDS.values()}


JOB_STATUS_KINDS = {resource_of(kind) for kind in SUSPENDABLE.values()
                    if isinstance(kind, ClearsStartTime)}
"""Job kinds whose status admitter writes: only to make their templates mutable again."""


RUNTIME_KINDS = {runtime_resource(runtime_kind) for kind in SUSPENDABLE.values()
                 if isinstance(kind, ReadsRuntimes) for runtime_kind in kind.runtime_kinds}
"""The objects job kinds resolve their pod sets from (a TrainJob's training runtimes)."""


def _is_job_kind(expr: ast.expr) -> bool:
    """`resource_of(...)`: the REST resource of whichever job kind an object is."""
    return isinstance(expr, ast.Call) and _tail(expr.func) == "resource_of"


class UnattributedRequest(AssertionError):
    """A request whose kind or verb cannot be read from the source."""


def group_of(kind: kube.Kind) -> str:
    return "" if kind.group_version == "v1" else kind.group_version.rpartition("/")[0]


@dataclass
class Module:
    name: str
    tree: ast.Module
    parents: dict[ast.AST, ast.AST]

    def enclosing(self, node: ast.AST, kind: type[ast.AST]) -> ast.AST | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, kind):
                return node
        return None


def _load(name: str) -> Module:
    path = ROOT.parent / (name.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT.parent / name.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    return Module(name, tree, parents)


def run_modules() -> list[Module]:
    """admitter's modules that `admitter run` imports, directly or not."""
    seen: dict[str, Module] = {}
    todo = [ENTRY]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name in ADMIN_ONLY or name in WORKER_SIDE:
            continue
        module = seen[name] = _load(name)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("admitter"):
                todo.append(node.module or "")
                todo += [f"{node.module}.{alias.name}" for alias in node.names
                         if (ROOT.parent / f"{node.module}.{alias.name}".replace(".", "/")
                             ).with_suffix(".py").exists()]
    return list(seen.values())


class Reader:
    def __init__(self, modules: list[Module]) -> None:
        self.modules = modules

    def used(self) -> set[Triple]:
        triples: set[Triple] = set()
        for module in self.modules:
            for call in (n for n in ast.walk(module.tree) if isinstance(n, ast.Call)):
                triples |= self._kube_call(module, call) | self._client_call(call)
        return triples

    # ---- Kube --------------------------------------------------------------------------

    def _kube_call(self, module: Module, call: ast.Call) -> set[Triple]:
        func = call.func
        if not isinstance(func, ast.Attribute):
            return set()
        on_kube = isinstance(func.value, ast.Attribute) and func.value.attr == "kube"  # self.kube
        given_kind = bool(call.args) and _tail(call.args[0]) in KIND_CONSTANTS
        if not (on_kube or (given_kind and func.attr in KUBE_VERBS)):
            return set()
        if module.name == "admitter.kube.client":
            return set()  # the wrapper itself; its methods are what is read here
        if func.attr not in KUBE_VERBS:
            raise UnattributedRequest(f"{module.name}:{call.lineno}: Kube.{func.attr} has no "
                                      "RBAC verb in KUBE_VERBS")
        if not call.args:
            raise UnattributedRequest(f"{module.name}:{call.lineno}: no kind argument")
        subresource = None
        for keyword in call.keywords:
            if keyword.arg == "subresource":
                if not isinstance(keyword.value, ast.Constant):
                    raise UnattributedRequest(f"{module.name}:{call.lineno}: subresource is "
                                              "not a constant")
                subresource = keyword.value.value
        verb = KUBE_VERBS[func.attr]
        kinds = self._kinds(module, call.args[0], call, depth=0)
        if subresource == "status" and _is_job_kind(call.args[0]):
            kinds = JOB_STATUS_KINDS  # a job kind's status is written only to clear its start
        return {(group_of(kind), kind.plural + (f"/{subresource}" if subresource else ""), verb)
                for kind in kinds}

    def _kinds(self, module: Module, expr: ast.expr, at: ast.AST, depth: int) -> set[kube.Kind]:
        where = f"{module.name}:{getattr(at, 'lineno', '?')}"
        if depth > 4:
            raise UnattributedRequest(f"{where}: the kind is passed through too many hands")
        name = _tail(expr)
        if name in KIND_CONSTANTS:
            return {KIND_CONSTANTS[name]}
        if _is_job_kind(expr):
            return {resource_of(kind) for kind in SUSPENDABLE.values()}  # any job kind
        if isinstance(expr, ast.Call) and _tail(expr.func) == "runtime_resource":
            return RUNTIME_KINDS
        if isinstance(expr, ast.IfExp):
            return (self._kinds(module, expr.body, at, depth + 1)
                    | self._kinds(module, expr.orelse, at, depth + 1))
        if isinstance(expr, ast.Name):
            function = module.enclosing(at, ast.FunctionDef | ast.AsyncFunctionDef)
            if function is not None:
                assigned = [node.value for node in ast.walk(function)
                            if isinstance(node, ast.Assign) and len(node.targets) == 1
                            and _tail(node.targets[0]) == expr.id
                            and isinstance(node.targets[0], ast.Name)]
                if assigned:
                    return set().union(*(self._kinds(module, value, at, depth + 1)
                                         for value in assigned))
                return self._argument_kinds(module, function, expr.id, depth)
        if isinstance(expr, ast.Attribute) and _tail(expr.value) == "self":
            return self._attribute_kinds(module, at, expr.attr, depth)
        raise UnattributedRequest(f"{where}: cannot tell which kind {ast.unparse(expr)} is")

    def _argument_kinds(self, module: Module, function: ast.AST, param: str,
                        depth: int) -> set[kube.Kind]:
        assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        names = [a.arg for a in function.args.args]
        if param not in names:
            raise UnattributedRequest(f"{module.name}:{function.lineno}: {param} is no parameter")
        position = names.index(param)
        callee = function.name
        if callee == "__init__":
            owner = module.enclosing(function, ast.ClassDef)
            assert isinstance(owner, ast.ClassDef)
            callee = owner.name
        if isinstance(module.parents.get(function), ast.ClassDef):
            position -= 1  # called as obj.method(...) or Class(...): `self` is not passed
        found: set[kube.Kind] = set()
        for caller in self.modules:
            for call in (n for n in ast.walk(caller.tree) if isinstance(n, ast.Call)):
                if _tail(call.func) != callee:
                    continue
                passed = [k.value for k in call.keywords if k.arg == param]
                passed += call.args[position:position + 1] if position < len(call.args) else []
                for expr in passed:
                    found |= self._kinds(caller, expr, call, depth + 1)
        if not found:
            raise UnattributedRequest(f"{module.name}: nobody calls {callee} with {param}")
        return found

    def _attribute_kinds(self, module: Module, at: ast.AST, attr: str,
                         depth: int) -> set[kube.Kind]:
        owner = module.enclosing(at, ast.ClassDef)
        found: set[kube.Kind] = set()
        for node in ast.walk(owner) if owner is not None else ():
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Attribute)
                    and node.targets[0].attr == attr and _tail(node.targets[0].value) == "self"):
                found |= self._kinds(module, node.value, node, depth + 1)
        if not found:
            raise UnattributedRequest(f"{module.name}: self.{attr} is never set")
        return found

    # ---- kubernetes_asyncio's CustomObjectsApi -----------------------------------------

    def _client_call(self, call: ast.Call) -> set[Triple]:
        func = call.func
        if not isinstance(func, ast.Attribute):
            return set()
        if func.attr in TYPED_REQUESTS:
            return {TYPED_REQUESTS[func.attr]}
        if func.attr in _typed_request_methods():
            raise UnattributedRequest(f"line {call.lineno}: {func.attr} is a request of "
                                      "kubernetes_asyncio's typed API missing in TYPED_REQUESTS")
        if not func.attr.endswith("_custom_object"):
            return set()
        verb = CLIENT_VERBS[func.attr.split("_")[0]]
        plurals = [arg for arg in call.args if isinstance(arg, ast.Attribute)
                   and arg.attr == "plural" and _tail(arg.value) in RESOURCE_CLASSES]
        if len(plurals) != 1:
            raise UnattributedRequest(f"line {call.lineno}: the plural is not <Kind>.plural")
        return {(GROUP, RESOURCE_CLASSES[_tail(plurals[0].value)].plural, verb)}


@cache
def _typed_request_methods() -> frozenset[str]:
    """Every request method of kubernetes_asyncio's typed APIs (`read_namespaced_pod`, …)."""
    return frozenset(
        method
        for name, api in vars(typed_client).items()
        if name.endswith("Api") and isinstance(api, type) and name != "CustomObjectsApi"
        for method in vars(api)
        if method.split("_")[0] in CLIENT_VERBS and not method.endswith("_with_http_info")
    )


def used_requests() -> set[Triple]:
    return Reader(run_modules()).used()


def worker_requests() -> set[Triple]:
    """What the manager asks of each worker: its own requests, and its informers'."""
    return Reader([_load(name) for name in (*sorted(WORKER_SIDE), "admitter.kube.informer")]
                  ).used()


def _tail(expr: ast.expr) -> str:
    """`self.kube` → kube, `kube.JOBS` → JOBS, `informer` → informer."""
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return ""


def kube_request_methods() -> Iterator[str]:
    """Kube's public methods that reach the API server (they call `self.request` or
    `call_api`), so a new one cannot go unmapped."""
    source = ast.parse(inspect.getsource(kube.Kube))
    (cls,) = source.body
    assert isinstance(cls, ast.ClassDef)
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if method.name.startswith("_") or method.name == "request":
            continue
        calls = {_tail(n.func) for n in ast.walk(method) if isinstance(n, ast.Call)}
        if calls & {"request", "call_api"}:
            yield method.name
