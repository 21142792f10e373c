"""A real, local Kubernetes control plane for integration tests and manual experiments.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK run as plain processes on
127.0.0.1 with certificates minted by `admitter.pki`; KWOK plays the kubelets of fake GPU nodes.
Everything (PKI, etcd data, logs, kubeconfig, pid record) lives in one state directory.

    with LocalCluster.start(tmp_dir, GpuNodeLayout(nodes=8)) as cluster:
        subprocess.run([cluster.binaries.kubectl, "--kubeconfig", cluster.kubeconfig_path, ...])
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from admitter import pki
from admitter.api import yaml_text
from admitter.testing import kwok
from admitter.testing.binaries import Binaries
from admitter.testing.kubeapi import ApiError, HttpsClient
from admitter.testing.nodes import KWOK_NODE_SELECTOR, GpuNodeLayout
from admitter.testing.processes import Component, launch, signal_group, stop
from admitter.testing.waiting import wait_for

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.1/16"  # KWOK hands out pod IPs from here: room for 65k pods.
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
CONTROLLERS = (
    "job-controller",
    "cronjob-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "node-lifecycle-controller",  # lifts the not-ready taint the API server puts on new nodes
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "replicaset-controller",
    "deployment-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
    "clusterrole-aggregation-controller",  # admitter-batch-* and view/edit/admin
    "resourceclaim-controller",  # a ResourceClaim per pod from its ResourceClaimTemplate
)
RECORD_FILE = "cluster.json"  # pids, ports and layout of a running cluster
NODE_LEASE_SECONDS = 40
"""Duration of the Lease KWOK keeps for each fake node in `kube-node-lease`, renewed every
quarter of it (10 s), as a kubelet does by default. The node lifecycle controller counts a node
healthy while its Lease or its status was renewed within `--node-monitor-grace-period` (50 s by
default), so a renewal may come 40 s late before a node is marked NotReady. KWOK's own default
is no Lease at all, and its default node stages then (v0.7) renew the status only every 10
minutes: every node went NotReady, tainted not-ready and unreachable, 50 s after each
renewal, until KWOK's initialize stage marked it Ready again some seconds later (about 5 s down
in every 55). With a Lease, the default stages also renew the status every 20 to 25 s."""


class KubectlError(subprocess.CalledProcessError):
    """A kubectl run that failed; its message ends with kubectl's own error (a test report shows
    only the message)."""

    def __str__(self) -> str:
        return f"{super().__str__()}: {(self.stderr or '').strip()}"


@dataclass
class LocalCluster:
    """Handle on a running control plane; `stop()` (or leaving the `with`) ends it."""

    state_dir: Path
    binaries: Binaries
    layout: GpuNodeLayout
    api_port: int
    components: list[Component] = field(default_factory=list)
    startup_seconds: float = 0.0
    detach: bool = False

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        state_dir: Path,
        layout: GpuNodeLayout | None = None,
        binaries: Binaries | None = None,
        timeout: float = 90.0,
        detach: bool = False,
    ) -> LocalCluster:
        """Start every component, create the layout's GPU nodes and wait until all is ready.

        `state_dir` must not hold a previous cluster's data (etcd would resurrect it). With
        `detach` the processes outlive this Python process (`hack/local-cluster up`); otherwise
        they are terminated when it dies, even without `stop()`.
        """
        began = time.monotonic()
        binaries = (binaries or Binaries.locate()).require()
        state_dir = state_dir.resolve()
        if (state_dir / "etcd").exists():
            raise ValueError(f"{state_dir} already holds a cluster; use a fresh directory")
        for sub in ("logs", "pki", "etcd"):
            (state_dir / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        etcd_port, peer_port, api_port, kcm_port, sched_port = _free_ports(5)
        cluster = cls(state_dir, binaries, layout or GpuNodeLayout(), api_port, detach=detach)
        cluster._write_pki_and_configs()
        try:
            cluster._launch("etcd", cluster._etcd_args(etcd_port, peer_port))
            cluster._launch("kube-apiserver", cluster._apiserver_args(etcd_port))
            cluster._wait(cluster.api().is_ready, timeout, "kube-apiserver")
            cluster._launch("kube-controller-manager", cluster._kcm_args(kcm_port))
            cluster._launch("kube-scheduler", cluster._scheduler_args(sched_port))
            cluster._launch("kwok", cluster._kwok_args())
            cluster._record()
            names = cluster.create_gpu_nodes(cluster.layout, timeout)
            cluster._wait(HttpsClient(kcm_port).is_healthy, timeout, "kube-controller-manager")
            cluster._wait(HttpsClient(sched_port).is_healthy, timeout, "kube-scheduler")
            cluster._wait(cluster._default_service_account_exists, timeout, "service accounts")
        except BaseException as err:
            cluster.stop()
            err.add_note(cluster.log_tails())
            raise
        cluster.startup_seconds = time.monotonic() - began
        print(f"local cluster up in {cluster.startup_seconds:.1f}s with {len(names)} GPU nodes")
        return cluster

    @classmethod
    def attach(cls, state_dir: Path) -> LocalCluster:
        """Re-open a cluster started by another process from its pid record (for `down`)."""
        record = json.loads((state_dir / RECORD_FILE).read_text())
        components = [
            Component(c["name"], c["argv"], c["pid"], Path(c["log_path"]))
            for c in record["components"]
        ]
        return cls(
            state_dir,
            Binaries.locate(),
            GpuNodeLayout(**record["layout"]),
            record["api_port"],
            components,
        )

    def stop(self) -> None:
        """End exactly the processes this cluster started; logs stay in `logs_dir`."""
        stop(self.components[::-1])

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- access ----------------------------------------------------------------------------

    @property
    def kubeconfig_path(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def ca_path(self) -> Path:
        return self.state_dir / "pki" / "ca.crt"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def api(self) -> HttpsClient:
        """A cluster-admin (system:masters) client for raw API calls."""
        pki_dir = self.state_dir / "pki"
        return HttpsClient(
            self.api_port, self.ca_path, (pki_dir / "admin.crt", pki_dir / "admin.key")
        )

    def kubectl(self, *args: str, check: bool = True,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the matching kubectl against this cluster and capture its output; with `check`,
        a failure raises `KubectlError`, which says what kubectl printed."""
        argv = [str(self.binaries.kubectl), "--kubeconfig", str(self.kubeconfig_path), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, input=input)
        if check and done.returncode:
            raise KubectlError(done.returncode, argv, done.stdout, done.stderr)
        return done

    def wait_established(self, crd: str = "--all", timeout: float = 120.0) -> None:
        """Wait until `crd` (`<plural>.<group>`, or every CRD) is Established. Hazard: a CRD
        created a moment ago has no conditions yet, and `kubectl wait` then fails at once
        ("conditions accessor error") instead of waiting, so it is asked again until then."""
        wait_for(lambda: self.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                                      "crd", crd, check=False).returncode == 0,
                 timeout, f"the CRDs {crd} established")

    def running(self) -> dict[str, bool]:
        return {c.name: c.alive() for c in self.components}

    def log_tails(self, lines: int = 30) -> str:
        """The last lines of every component log, for failure reports."""
        return "\n".join(
            f"----- {c.name} ({c.log_path}) -----\n{c.tail(lines)}" for c in self.components
        )

    # ---- faults ----------------------------------------------------------------------------

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def pause(self, name: str) -> None:
        """SIGSTOP a component (its whole process group): it keeps its connections open and
        answers nothing, as a hung or partitioned process does."""
        signal_group(self.component(name).pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        signal_group(self.component(name).pid, signal.SIGCONT)

    def restart(self, name: str, timeout: float = 60.0) -> None:
        """Stop a component and start it again with the same arguments (etcd on the same data
        directory, the API server on the same port), then wait until the API answers.

        Hazard: call it from the thread that started the cluster; a component is ended when
        the thread that launched it dies (see `processes.launch`)."""
        old = self.component(name)
        signal_group(old.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
        stop([old])
        binary, *args = old.argv
        fresh = launch(name, [binary, *args], self.logs_dir, outlive_parent=self.detach)
        self.components[self.components.index(old)] = fresh
        self._record()
        self._wait(self.api().is_ready, timeout, f"kube-apiserver after restarting {name}")

    def create_gpu_nodes(self, layout: GpuNodeLayout, timeout: float = 60.0) -> list[str]:
        """Create the layout's nodes through the API and wait until pods can land on them."""
        api = self.api()
        names = []
        for manifest in layout.manifests():
            api.request("POST", "/api/v1/nodes", manifest)
            names.append(manifest["metadata"]["name"])
        self._wait(lambda: set(names) <= self._ready_nodes(), timeout, f"{len(names)} Ready nodes")
        return names

    # ---- internals -------------------------------------------------------------------------

    def _launch(self, name: str, args: list[str]) -> None:
        binary = getattr(self.binaries, name.replace("-", "_"))
        argv = [str(binary), *args]
        self.components.append(launch(name, argv, self.logs_dir, outlive_parent=self.detach))

    def _record(self) -> None:
        record = {
            "api_port": self.api_port,
            "layout": asdict(self.layout),
            "components": [
                {"name": c.name, "argv": c.argv, "pid": c.pid, "log_path": str(c.log_path)}
                for c in self.components
            ],
        }
        (self.state_dir / RECORD_FILE).write_text(json.dumps(record, indent=2))

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        wait_for(condition, timeout, what, on_poll=self._raise_if_exited)

    def _raise_if_exited(self) -> None:
        for component in self.components:
            code = component.exited()
            if code is not None:
                raise RuntimeError(
                    f"{component.name} exited with code {code}; log tail:\n{component.tail(40)}"
                )

    def _ready_nodes(self) -> set[str]:
        """Nodes KWOK reports Ready and the node controller has untainted (schedulable)."""
        selector = urllib.parse.quote(KWOK_NODE_SELECTOR)
        nodes = self.api().request("GET", f"/api/v1/nodes?labelSelector={selector}")["items"]
        return {node["metadata"]["name"] for node in nodes if schedulable(node)}

    def _default_service_account_exists(self) -> bool:
        try:
            self.api().request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
        except ApiError:
            return False
        return True

    def _write_pki_and_configs(self) -> None:
        pki_dir = self.state_dir / "pki"
        ca = pki.new_ca("admitter-local-ca")
        ca.write(self.ca_path, pki_dir / "ca.key")
        hosts = ["127.0.0.1", "localhost", "10.96.0.1", "kubernetes", "kubernetes.default"]
        hosts += ["kubernetes.default.svc", "kubernetes.default.svc.cluster.local"]
        pki.serving_cert(ca, "kube-apiserver", hosts).write(
            pki_dir / "apiserver.crt", pki_dir / "apiserver.key"
        )
        admin = pki.client_cert(ca, "admitter-admin", ["system:masters"])
        admin.write(pki_dir / "admin.crt", pki_dir / "admin.key")
        sa = pki.service_account_keys()
        pki.write_pem(pki_dir / "sa.key", sa.private_pem, private=True)
        pki.write_pem(pki_dir / "sa.pub", sa.public_pem)
        self.kubeconfig_path.write_text(yaml_text.dump(self._kubeconfig(ca, admin)))
        self.kubeconfig_path.chmod(0o600)
        kwok.write_config(self.state_dir / "kwok.yaml")

    def _kubeconfig(self, ca: pki.CertKey, user: pki.CertKey) -> dict[str, Any]:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(user.cert_pem),
                        "client-key-data": b64(user.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }

    def _etcd_args(self, port: int, peer_port: int) -> list[str]:
        client, peer = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer_port}"
        return [
            "--name=local",
            f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_args(self, etcd_port: int) -> list[str]:
        pki_dir = self.state_dir / "pki"
        return [
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--secure-port={self.api_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
            f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
            f"--client-ca-file={self.ca_path}",
            f"--service-account-issuer={SA_ISSUER}",
            f"--service-account-key-file={pki_dir / 'sa.pub'}",
            f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--endpoint-reconciler-type=none",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            "--profiling=false",
        ]

    def _component_args(self, port: int, name: str) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig_path}",
            "--leader-elect=false",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={self.state_dir / name}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
        ]

    def _kcm_args(self, port: int) -> list[str]:
        return [
            *self._component_args(port, "kube-controller-manager"),
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.state_dir / 'pki' / 'sa.key'}",
            f"--root-ca-file={self.ca_path}",
        ]

    def _scheduler_args(self, port: int) -> list[str]:
        return self._component_args(port, "kube-scheduler")

    def _kwok_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig_path}",
            f"--config={self.state_dir / 'kwok.yaml'}",
            f"--manage-nodes-with-label-selector={KWOK_NODE_SELECTOR}",
            f"--cidr={POD_CIDR}",
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        ]


def schedulable(node: dict[str, Any]) -> bool:
    """KWOK reports the node Ready and the node lifecycle controller has taken its
    `node.kubernetes.io/` taints off (they come back while its heartbeats lapse)."""
    ready = any(
        cond["type"] == "Ready" and cond["status"] == "True"
        for cond in node.get("status", {}).get("conditions", [])
    )
    tainted = any(
        taint["key"].startswith("node.kubernetes.io/") for taint in node["spec"].get("taints", [])
    )
    return ready and not tainted


def _free_ports(count: int) -> list[int]:
    """Distinct ports the kernel considers free right now (all held open until chosen)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
