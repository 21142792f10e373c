"""Start and stop control-plane processes, each in its own process group with a log file.

A process group per component lets `stop` end exactly what we started (and anything it
spawned), and a pid file lets another invocation (`hack/local-cluster down`) do the same later.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Resolved up front: the child between fork and exec should not touch the dynamic loader.
_prctl = ctypes.CDLL(None, use_errno=True).prctl


@dataclass
class Component:
    """One running binary: its pid doubles as its process-group id."""

    name: str
    argv: list[str]
    pid: int
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def exited(self) -> int | None:
        """Exit code if the process has ended (None while it runs or when not our child)."""
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        """Still running and still the binary we launched (guards against pid reuse)."""
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
        return not zombie and cmdline[0].decode() == self.argv[0]

    def tail(self, lines: int) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def launch(name: str, argv: Sequence[str], log_dir: Path, outlive_parent: bool) -> Component:
    """Start `argv` in a new session, stdout and stderr appended to log_dir/name.log.

    Unless `outlive_parent`, the kernel SIGTERMs it when the calling thread dies (so call this
    from a thread that lives as long as the cluster): a killed test run leaves no strays.
    """
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if outlive_parent else _terminate_with_parent,
        )
    return Component(name, list(argv), popen.pid, log_path, popen)


def stop(components: Sequence[Component], grace: float = 10.0) -> None:
    """SIGTERM each component's process group, then SIGKILL whatever outlives `grace`."""
    running = [c for c in components if c.alive()]
    for component in running:
        signal_group(component.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(c.alive() for c in running) and time.monotonic() < deadline:
        time.sleep(0.05)
    for component in running:
        if component.alive():  # never signal a group whose leader is gone: its id may be reused
            signal_group(component.pid, signal.SIGKILL)
        if component.popen is not None:
            component.popen.wait()


def _terminate_with_parent() -> None:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a component's process group; nothing if it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
