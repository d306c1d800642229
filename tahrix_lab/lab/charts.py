"""Charts of spend and tokens, with Altair.

Why Altair: the cost helpers already return tidy DataFrames, and Altair turns
one into a chart with a few declarative lines; the charts are interactive in
JupyterLab (tooltips, legend) with no extra front-end set-up, they serialise
to a Vega-Lite spec that tests can inspect (``chart.to_dict()``) without
drawing pixels, and ``vl-convert`` exports PNG/SVG for reports
(``chart.save("spend.png")``). Matplotlib would need more code per chart and
gives static images only.
"""

from __future__ import annotations

import altair as alt
import pandas as pd


def _need(df: pd.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"The frame lacks {', '.join(missing)}; build it with costs(by=(...)) including those."
        )


def spend_over_time(df: pd.DataFrame, *, period: str = "day", color: str = "model") -> alt.Chart:
    """Stacked bars of USD per ``period`` coloured by ``color`` (a frame from ``costs(by=(color, period))``)."""
    _need(df, period, color, "cost_usd")
    chart: alt.Chart = (
        alt.Chart(df, title=f"Spend per {period} by {color}")
        .mark_bar()
        .encode(
            x=alt.X(f"{period}:T", title=period),
            y=alt.Y("sum(cost_usd):Q", title="USD"),
            color=alt.Color(f"{color}:N"),
            tooltip=[
                alt.Tooltip(f"{period}:T"),
                alt.Tooltip(f"{color}:N"),
                alt.Tooltip("sum(cost_usd):Q", format="$.4f", title="USD"),
                alt.Tooltip("sum(calls):Q", title="calls"),
            ],
        )
    )
    return chart


def tokens_by_model(df: pd.DataFrame) -> alt.Chart:
    """Input and output tokens per model (a frame from ``costs(by=("model", ...))``)."""
    _need(df, "model", "input_tokens", "output_tokens")
    totals = df.groupby("model", as_index=False)[["input_tokens", "output_tokens"]].sum()
    long = totals.melt(id_vars="model", var_name="kind", value_name="tokens")
    long["tokens"] = long["tokens"].astype("float64")
    chart: alt.Chart = (
        alt.Chart(long, title="Tokens by model")
        .mark_bar()
        .encode(
            y=alt.Y("model:N", sort="-x", title=None),
            x=alt.X("sum(tokens):Q", title="tokens"),
            color=alt.Color("kind:N"),
            tooltip=["model:N", "kind:N", alt.Tooltip("sum(tokens):Q", format=",")],
        )
    )
    return chart


def budget_fill(df: pd.DataFrame, column: str = "monthly_fill") -> alt.LayerChart:
    """Each user's fill of a budget bucket (a frame from ``budget_status``); the 1.0 line is the cap."""
    _need(df, "user", column)
    base = alt.Chart(df, title="Budget used")
    bars = base.mark_bar().encode(
        y=alt.Y("user:N", sort="-x", title=None),
        x=alt.X(f"{column}:Q", title="fraction of cap", axis=alt.Axis(format="%")),
        color=alt.condition(alt.datum[column] >= 0.8, alt.value("#d62728"), alt.value("#4c78a8")),
        tooltip=["user:N", alt.Tooltip(f"{column}:Q", format=".0%")],
    )
    rule = alt.Chart(pd.DataFrame({"cap": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(x="cap:Q")
    layered: alt.LayerChart = bars + rule
    return layered


__all__ = ["budget_fill", "spend_over_time", "tokens_by_model"]
