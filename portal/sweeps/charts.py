"""Vega-Lite specs of a sweep (rendered by core/chart.html): a parallel-coordinates chart (each task a
line across its varied values and the objective, each axis scaled to its own range) and each varied
value against the objective. One `data.values` table, one row per task with a run that logged the
objective, so the CSV is whole."""

from typing import Any

from portal.sweeps.selectors import SweepView

SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"


def _rows(view: SweepView) -> list[dict[str, Any]]:
    objective = view.sweep.objective
    return [{"task": task.index, "best": task.best, **{key: task.values.get(key) for key in view.param_keys},
             objective: task.metrics[objective]}
            for task in view.tasks if task.metrics.get(objective) is not None]


def parallel_coordinates(view: SweepView) -> dict[str, Any]:
    objective = view.sweep.objective
    axes = [*view.param_keys, objective]
    return {
        "$schema": SCHEMA, "width": "container", "height": 300,
        "title": f"Tasks across their values and {objective}",
        "data": {"values": _rows(view)},
        "transform": [
            {"fold": axes, "as": ["axis", "value"]},
            {"calculate": "toNumber(datum.value)", "as": "number"},
            {"joinaggregate": [{"op": "min", "field": "number", "as": "low"},
                               {"op": "max", "field": "number", "as": "high"}], "groupby": ["axis"]},
            {"calculate": "datum.high == datum.low ? 0.5 "
                          ": (datum.number - datum.low) / (datum.high - datum.low)", "as": "scaled"},
        ],
        "layer": [
            {"mark": {"type": "line", "opacity": 0.7},
             "encoding": {"x": {"field": "axis", "type": "nominal", "sort": axes, "title": None},
                          "y": {"field": "scaled", "type": "quantitative", "axis": None},
                          "detail": {"field": "task", "type": "nominal"},
                          "color": {"field": objective, "type": "quantitative"},
                          "size": {"condition": {"test": "datum.best", "value": 4}, "value": 1.5},
                          "tooltip": [{"field": "task"}, {"field": "axis"}, {"field": "value"}]}},
            {"mark": {"type": "text", "dy": -8, "fontSize": 10},
             "encoding": {"x": {"field": "axis", "type": "nominal", "sort": axes},
                          "y": {"field": "scaled", "type": "quantitative"},
                          "text": {"field": "value"}}},
        ],
    }


def params_vs_objective(view: SweepView) -> dict[str, Any]:
    objective = view.sweep.objective
    return {
        "$schema": SCHEMA, "title": f"{objective} against each varied value",
        "data": {"values": _rows(view)},
        "transform": [{"fold": view.param_keys, "as": ["parameter", "value"]},
                      {"calculate": "toNumber(datum.value)", "as": "number"}],
        "facet": {"column": {"field": "parameter", "type": "nominal", "title": None}},
        "spec": {"width": 220, "height": 220, "mark": {"type": "point", "filled": True, "size": 70},
                 "encoding": {"x": {"field": "number", "type": "quantitative", "title": "value",
                                    "scale": {"zero": False}},
                              "y": {"field": objective, "type": "quantitative", "scale": {"zero": False}},
                              "color": {"field": "best", "type": "nominal", "title": "best"},
                              "tooltip": [{"field": "task"}, {"field": "value"}, {"field": objective}]}},
        "resolve": {"scale": {"x": "independent"}},
    }
