"""The PromQL of every panel of the Grafana dashboard, with the dashboard's variables expanded, so
that tests (and the local stack's end-to-end check) can run each query against a real Prometheus."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

DASHBOARD = Path(__file__).resolve().parent / "grafana" / "quorum-health.json"

# what Grafana substitutes when every cluster and partition is selected, with a 1 s scrape
ALL_SELECTED = {"cluster": ".*", "partition": ".*", "__rate_interval": "1m", "__interval": "15s",
                "__range": "30m"}


class PanelQuery(NamedTuple):
    panel: str
    ref_id: str
    expr: str  # variables expanded
    instant: bool


def expand_variables(expr: str, values: dict[str, str] | None = None) -> str:
    """Replace `$name` and `${name}` as Grafana does; an unknown variable is an error."""
    values = {**ALL_SELECTED, **(values or {})}

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"dashboard variable ${name} has no value to expand in: {expr}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, expr)


def panel_queries(dashboard: Path = DASHBOARD, values: dict[str, str] | None = None) -> list[PanelQuery]:
    """Every Prometheus query of the dashboard's panels (rows included) and annotations."""
    board = json.loads(Path(dashboard).read_text())
    queries = []

    def walk(panels: list[dict]) -> None:
        for panel in panels:
            walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                queries.append(PanelQuery(panel["title"], target["refId"], expand_variables(target["expr"], values),
                                          bool(target.get("instant"))))

    walk(board["panels"])
    for annotation in board.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            queries.append(PanelQuery(f"annotation: {annotation['name']}", "",
                                      expand_variables(annotation["expr"], values), False))
    return queries
