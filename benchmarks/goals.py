"""The streaming job's goals, each a figure against Spark's own floor or ceiling measured in the
same run, printed one line a goal:

    goal NAME: VALUE against FLOOR = RATIO (goal G): holds

`short` instead of `holds` when the goal is missed; `not measured` with what would measure it.
A goal is on the ratio (the job against Spark's own figure) or, where the goal is a figure of its
own (0.4 cores, 800 MB, 15 s), on the value, with the ratio printed beside it.
"""
from __future__ import annotations

from dataclasses import dataclass

MB = 1000 * 1000  # the goals' memory figures are in MB


@dataclass(frozen=True)
class Goal:
    name: str
    value: float | None       # the job's figure; None: not measured in this run
    floor: float | None       # Spark's own, same run, same units
    bound: float              # what the ratio (or, `on_value`, the value) must reach
    unit: str = ""
    floor_name: str = ""      # what the floor is
    at_least: bool = False    # the bound is a floor of its own (throughput), not a ceiling
    on_value: bool = False    # the bound is on the value, not on the ratio
    how_to_measure: str = ""  # said when the goal was not measured

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.floor:
            return None
        return self.value / self.floor

    @property
    def holds(self) -> bool | None:
        judged = self.value if self.on_value else self.ratio
        if judged is None:
            return None
        return judged >= self.bound if self.at_least else judged <= self.bound

    def line(self) -> str:
        if self.holds is None:
            return f"goal {self.name}: not measured ({self.how_to_measure})"
        sign = ">=" if self.at_least else "<="
        bound = f"{sign} {_figure(self.bound, self.unit)}" if self.on_value else f"{sign} {self.bound:g}"
        if self.ratio is None:  # a goal on the value, its floor not measured in this run
            against = f"{self.floor_name} not measured".strip()
        else:
            against = f"{self.floor_name} {_figure(self.floor, self.unit)}".strip() + f" = {self.ratio:.2f}"
        return (f"goal {self.name}: {_figure(self.value, self.unit)} against {against} "
                f"(goal {bound}): {'holds' if self.holds else 'short'}")


def _figure(x: float, unit: str) -> str:
    if unit == "MB":  # a fraction of a MB (per cluster, say) keeps two decimals
        return f"{x / MB:,.0f} MB" if x >= 10 * MB else f"{x / MB:.2f} MB"
    if unit == "events/s":
        return f"{x:,.0f} events/s"
    if unit == "s":
        return f"{x:.1f} s"
    return f"{x:.2f} {unit}".strip()
