"""The ``valuepatterns`` backend itself: the in-process hook that counts each op's zeros and
repeated values, and the rows it reads back."""

from __future__ import annotations

import importlib.util
import json

from perfstack.plugin.backend import (
    Availability,
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Layer, Quantity, Row

SOURCE = "valuepatterns"


#: Ops whose output is uninitialized memory: its values mean nothing.
UNINITIALIZED = ("aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                 "aten::new_empty_strided", "aten::resize_")


#: Ops that write a constant by design: reported, never flagged.
CONSTANT_BY_DESIGN = ("aten::zeros", "aten::zeros_like", "aten::ones", "aten::ones_like",
                      "aten::full", "aten::full_like", "aten::fill_", "aten::zero_",
                      "aten::new_zeros", "aten::new_ones", "aten::new_full", "aten::scalar_tensor")


ZERO_SHARE = 0.4  # a finding above this share of zero output elements...


MIN_ELEMENTS = 100_000  # ...written over the run, so tiny tensors do not count


SINGLE_VALUE_SHARE = 0.5


class ValuePatternsBackend(Backend):
    """Zero and single-value shares of every op's outputs (framework layer)."""

    name = "valuepatterns"
    layers = (Layer.FRAMEWORK,)
    needs_import = "torch"
    description = "share of each op's outputs that are zeros or one repeated value (GVProf)"
    opt_in = True
    options = (Option("max_calls", "calls of one op to check before only counting", 2000, int,
                      minimum=1),)

    def check(self) -> Availability:
        """Available when torch is installed."""
        if importlib.util.find_spec("torch") is None:
            return Availability.no("torch is not installed", "pip install torch")
        return Availability.yes()

    def launch(self, ctx: RunContext) -> Launch:
        """Check op outputs inside the workload process."""
        return Launch(inprocess=[InProcessHook("perfstack_plugins.valuepatterns.inproc:start",
                                               {"max_calls": ctx.options.get("max_calls", 2000)})])

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Turn the per-op counts into framework rows."""
        path = ctx.artifact_dir / "valuepatterns.json"
        if not path.is_file():
            return Collected(notes=["the analysis did not finish: no results were written"])
        data = json.loads(path.read_text("utf-8"))
        rows = []
        for op, e in data["ops"].items():
            if op in UNINITIALIZED or not e["elements"]:
                continue
            rows.append(Row(
                key=op, name=op, source=SOURCE,
                values={"calls": Quantity(e["calls"], "count"),
                        "elements": Quantity(e["elements"], "count"),
                        "zero_share": Quantity(100 * e["zeros"] / e["elements"], "%"),
                        "single_value_calls": Quantity(
                            100 * e["single_value_calls"] / e["checked"], "%")},
                attrs={"checked_calls": e["checked"],
                       "constant_by_design": op in CONSTANT_BY_DESIGN}))
        rows.sort(key=lambda r: -(r.values["elements"].value or 0) * (
            r.values["zero_share"].value or 0))
        notes = [f"checked up to {data['max_calls']} calls per op; slows the workload, so its "
                 "wall time says nothing about the others"]
        return Collected(rows={Layer.FRAMEWORK: rows}, notes=notes,
                         artifacts={"counts": path})
