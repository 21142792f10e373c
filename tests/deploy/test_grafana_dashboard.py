"""deploy/grafana-dashboard.json charts only series the controller exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from admitter.controller.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"


def test_every_series_the_dashboard_charts_is_exported() -> None:
    exported = {sample_name for family in Metrics().registry.collect()
                for sample_name in (family.name, f"{family.name}_total",
                                    f"{family.name}_bucket", f"{family.name}_count",
                                    f"{family.name}_sum")}
    panels = json.loads(DASHBOARD.read_text())["panels"]
    charted = {name for panel in panels for target in panel["targets"]
               for name in re.findall(r"admitter_[a-z_]+", target["expr"])}
    assert len(charted) >= 8
    assert charted <= exported, charted - exported
