"""The page, rendered on the server from one plain dict (`Board`), for a live cluster and a
simulation alike; the browser's script only swaps in sections the server sends again."""

from __future__ import annotations

from html import escape
from typing import Any

from admitter.kubectl.times import span

Board = dict[str, Any]
"""queues, history, capacity, pending, running, now, title, live, and over a fleet clusters
(see `live.board` and `simulated.board`)."""

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
CHART_WIDTH, CHART_HEIGHT = 720, 200
SECTIONS = ("queues", "clusters", "gpus", "pending", "running")
"""In page order; `clusters` only over a fleet."""


def _bar(value: float, whole: float, label: str, kind: str) -> str:
    width = 0.0 if whole <= 0 else min(100.0, 100.0 * value / whole)
    return (f'<div class="bar {kind}" title="{escape(label)}"><div class="fill" '
            f'style="width:{width:.1f}%"></div><span>{escape(label)}</span></div>')


def queues_section(board: Board) -> str:
    """One row per queue, indented under its parent: GPUs held against its budget now, and
    funded GPU-hours delivered against owed over the window."""
    depth: dict[str | None, int] = {None: -1}
    rows = []
    for q in board["queues"]:
        depth[q["name"]] = depth.get(q["parent"], -1) + 1
        held = f"{q['held']:g} of {q['budget']:g} GPUs budgeted" + (
            "" if q["fairShare"] is None else f" (fair share {q['fairShare']:g})")
        share = q["usedGpuHours"] / q["owedGpuHours"] if q["owedGpuHours"] else 0.0
        window = (f"{q['usedGpuHours']:.1f} of {q['owedGpuHours']:.0f} GPU-h owed "
                  f"({share:.1%})")
        rows.append(
            f'<tr data-queue="{escape(q["name"])}" data-held="{q["held"]:g}" '
            f'data-budget="{q["budget"]:g}" data-used="{q["usedGpuHours"]:g}" '
            f'data-owed="{q["owedGpuHours"]:g}" data-pending="{q["pending"]}">'
            f'<td style="padding-left:{depth[q["name"]] * 1.5 + 0.3:.1f}em">'
            f'{escape(q["name"])}</td><td class="num">{q["rank"] or ""}</td>'
            f'<td>{_bar(q["held"], q["budget"], held, "now")}</td>'
            f'<td>{_bar(q["usedGpuHours"], q["owedGpuHours"], window, "window")}</td>'
            f'<td class="num">{q["pending"]}</td></tr>')
    return ('<table><tr><th>queue</th><th>rank</th><th>GPUs held / budget</th>'
            '<th>delivered / owed over the window</th><th>pending</th></tr>'
            + "".join(rows) + "</table>")


def gpus_section(board: Board) -> str:
    """GPUs held per leaf queue over time, against the capacity, as an SVG line chart."""
    history = board["history"]
    points, leaves = history["points"], history["leaves"]
    if not points:
        return "<p>No samples yet.</p>"
    start, end = points[0][0], max(points[-1][0], points[0][0] + 1)
    top = max([board["capacity"], 1] + [max(held, default=0) for _, held in points])

    def xy(at: float, value: float) -> str:
        x = (at - start) / (end - start) * CHART_WIDTH
        return f"{x:.1f},{CHART_HEIGHT - value / top * CHART_HEIGHT:.1f}"

    level = CHART_HEIGHT - board["capacity"] / top * CHART_HEIGHT
    lines = [f'<line class="capacity" x1="0" x2="{CHART_WIDTH}" y1="{level:.1f}" '
             f'y2="{level:.1f}"/>']
    legend = [f'<span class="key capacity">capacity {board["capacity"]:g} GPUs</span>']
    for i, leaf in enumerate(leaves):
        colour = PALETTE[i % len(PALETTE)]
        corners = [xy(at, points[n - 1][1][i]) + " " if n else "" for n, (at, _) in
                   enumerate(points)]  # each sample holds until the next: a step line
        steps = " ".join(corners[n] + xy(at, held[i]) for n, (at, held) in enumerate(points))
        lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{steps}"><title>{escape(leaf)}</title></polyline>')
        legend.append(f'<span class="key" style="border-color:{colour}">{escape(leaf)} '
                      f'{points[-1][1][i]:g}</span>')
    return (f'<svg viewBox="0 -4 {CHART_WIDTH} {CHART_HEIGHT + 8}" class="chart" '
            'preserveAspectRatio="none">'
            + "".join(lines) + f'</svg><div class="legend">{"".join(legend)}</div>'
            f'<p class="note">over the last {span(end - start)}{history.get("note", "")}</p>')


def _link(row: Board, board: Board) -> str:
    name = escape(row["name"])
    href = row.get("href")
    return f'<a href="{escape(href)}">{name}</a>' if href and board["live"] else name


def pending_section(board: Board) -> str:
    rows = "".join(
        f'<tr data-workload="{escape(r["key"])}" data-reason="{escape(r["reason"] or "")}" '
        f'data-position="{r["position"]}"><td class="num">{r["position"]}</td>'
        f'<td>{_link(r, board)}</td><td>{escape(r["clusterQueue"])}</td>'
        f'<td class="num">{r["gpus"]}</td><td>{escape(r["reason"] or "")}</td>'
        f'<td>{escape(r["wouldStart"])}</td></tr>' for r in board["pending"])
    return ('<table><tr><th>#</th><th>workload</th><th>queue</th><th>GPUs</th><th>reason</th>'
            f'<th>would start</th></tr>{rows}</table>' if rows else "<p>Nothing waits.</p>")


def _protection(row: Board) -> str:
    if not row["funded"]:
        return "unfunded"
    left = row["protectionLeftSeconds"]
    return f"{span(left)} left" if left else "ended"


def running_section(board: Board) -> str:
    rows = "".join(
        f'<tr data-workload="{escape(r["key"])}"><td>{_link(r, board)}</td>'
        f'<td>{escape(r["clusterQueue"])}</td><td class="num">{r["gpus"]}</td>'
        f'<td>{_protection(r)}</td><td>{"yes" if r["resumable"] else "no"}</td></tr>'
        for r in board["running"])
    return ('<table><tr><th>workload</th><th>queue</th><th>GPUs</th><th>protection</th>'
            f'<th>resumable</th></tr>{rows}</table>' if rows else "<p>Nothing runs.</p>")


def clusters_section(board: Board) -> str:
    """Over a fleet, one row per cluster: whether the manager reaches it, its nodes, and the
    GPUs admitted there against those it has."""
    rows = []
    for c in board.get("clusters") or ():
        if not c["worker"]:
            reach = "the manager's own nodes"
        elif c["reachable"]:
            reach = "reachable"
        else:
            reach = f"not reachable: {c['reason']}" + (f" ({c['message']})" if c["message"]
                                                        else "")
        nodes = "?" if c["nodes"] is None else str(c["nodes"])
        whole = c["gpus"] or 0
        held = (f"{c['admittedGpus']} of {'?' if c['gpus'] is None else c['gpus']} GPUs "
                f"admitted ({c['admittedWorkloads']} workloads)")
        rows.append(
            f'<tr data-cluster="{escape(c["name"])}" data-reachable="{c["reachable"]}" '
            f'data-gpus="{c["gpus"]}" data-admitted="{c["admittedGpus"]}">'
            f'<td>{escape(c["name"])}</td><td>{escape(reach)}</td>'
            f'<td class="num">{nodes}</td>'
            f'<td>{_bar(c["admittedGpus"], whole, held, "now")}</td></tr>')
    return ('<table><tr><th>cluster</th><th>manager reaches it</th><th>nodes</th>'
            '<th>GPUs admitted / its GPUs</th></tr>' + "".join(rows) + "</table>")


def sections(board: Board) -> dict[str, str]:
    """Every section of the overview; the clusters' only over a fleet."""
    parts = {"queues": queues_section(board), "gpus": gpus_section(board),
             "pending": pending_section(board), "running": running_section(board)}
    if board.get("clusters"):
        parts["clusters"] = clusters_section(board)
    return parts


STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em} h2{font-size:1.05em;margin-top:1.4em}
table{border-collapse:collapse;width:100%} td,th{padding:.25em .5em;border-bottom:1px solid #eee;
text-align:left;vertical-align:middle} .num{text-align:right}
.bar{position:relative;height:1.3em;background:#f1f1f1;border:1px solid #ccc;min-width:18em}
.bar .fill{height:100%;background:#8fb3d9} .bar.window .fill{background:#9ccf8f}
.bar span{position:absolute;left:.4em;top:0;font-size:.85em;line-height:1.3em;white-space:nowrap}
.chart{width:100%;max-width:60em;height:14em;background:#fafafa;border:1px solid #ddd}
.chart .capacity{stroke:#888;stroke-dasharray:6 4}
.key{display:inline-block;border-left:1em solid #888;padding:0 .6em;margin:.2em}
.note{color:#777;font-size:.85em} #status{color:#777;font-size:.85em}
"""

SCRIPT = """
const status = document.getElementById("status");
const source = new EventSource("/events" + location.pathname.replace(/^\\/?/, "?path=/"));
source.onmessage = (event) => {
  const parts = JSON.parse(event.data);
  for (const [id, html] of Object.entries(parts)) {
    const section = document.getElementById(id);
    if (section) section.innerHTML = html;
  }
  status.textContent = "live, updated " + new Date().toLocaleTimeString();
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
};
source.onerror = () => { status.textContent = "disconnected; retrying"; };
"""


def page(title: str, body: str, live: bool) -> str:
    script = f"<script>{SCRIPT}</script>" if live else ""
    state = '<p id="status">connecting</p>' if live else '<p id="status">simulated</p>'
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{state}{body}'
            f'{script}</body></html>')


def overview(board: Board) -> str:
    parts = sections(board)
    titles = {"queues": "Queues: budget and fair share now, owed and delivered over the window",
              "clusters": "Clusters of the fleet: GPUs admitted in each",
              "gpus": "GPUs per leaf queue over time", "pending": "Waiting, in queue order",
              "running": "Running, most GPUs first"}
    body = "".join(f'<h2>{titles[name]}</h2><section id="{name}">{parts[name]}</section>'
                   for name in SECTIONS if name in parts)
    return page(board["title"], body, board["live"])
