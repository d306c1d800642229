"""`tahrix costs`: calls, tokens and USD grouped by model, day, user…, and the per-session
sums that `tahrix sessions` shows. Prices come from the one pricer (``agent.pricing``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tahrix_lab.app.commands.output import new_console, open_store, plain, print_json_lines, usd

if TYPE_CHECKING:  # the handlers import what they use: `tahrix --help` loads none of it
    from tahrix_lab.agent.storage import TranscriptStore


def add_commands(sub: Any) -> None:
    p = sub.add_parser("costs", help="calls, tokens and USD grouped by model, day, user…")
    p.add_argument(
        "--by",
        default="model,day",
        help="comma-separated: model,backend,user,team,purpose,case,session,hour,day,week,month",
    )
    p.add_argument("--since", type=_date, help="YYYY-MM-DD (UTC)")
    p.add_argument("--until", type=_date, help="YYYY-MM-DD (UTC), exclusive")
    p.add_argument("--user")
    p.add_argument("--team", help="only this team's sessions (a session's team is $TAHRIX_TEAM when made)")
    p.add_argument("--case", help="only the sessions linked to this case")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument("--json", action="store_true", help="one JSON object per line, for scripts")
    p.set_defaults(func=_costs)


def _date(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date like 2026-01-31") from None


def costs_frame(store: TranscriptStore, **kwargs: Any) -> Any:
    """``costs`` in one burst on the file: genai-prices' data is loaded before the lease,
    so pricing a model seen for the first time does not hold the file that long."""
    from genai_prices import data_snapshot

    from tahrix_lab.lab.costs import costs

    data_snapshot.get_snapshot()
    with store.lease():
        return costs(store, **kwargs)


def session_costs(store: TranscriptStore, ids: Sequence[str]) -> dict[str, tuple[int, float | None]]:
    """Calls and USD of the listed sessions, each call priced by the one pricer at its time
    (as ``show`` prices them). Unknown prices are left out of the sum, as in ``tahrix costs``;
    a session with no known price has cost ``None``. No DataFrame: pandas alone would
    take ``tahrix sessions`` past a second."""
    from tahrix_lab.agent.pricing import DEFAULT_PRICER
    from tahrix_lab.agent.transcript import Usage

    if not ids:
        return {}
    # one read; the pricing runs after it, with the file let go
    rows = store.usage_rows(session_ids=list(ids))
    per: dict[str, tuple[int, float | None]] = {}
    for r in rows:
        sid = r["session_id"]
        calls, total = per.get(sid, (0, None))
        tokens = Usage(r["input_tokens"], r["output_tokens"], r["cache_read_tokens"], r["cache_write_tokens"],
                       r["reasoning_tokens"])  # fmt: skip
        cost = DEFAULT_PRICER.price(r["model_id"], tokens, backend=r["backend"], at=r["created_at"])
        per[sid] = (calls + 1, total if cost is None else (total or 0.0) + cost)
    return per


def _costs(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tahrix_lab.flow.textsafe import safe, shown

    store = open_store()
    df = costs_frame(
        store, by=args.by, since=args.since, until=args.until, user=args.user, team=args.team, case=args.case
    )
    if args.json:
        print_json_lines([{str(k): plain(v) for k, v in rec.items()} for rec in df.to_dict("records")])
        return 0
    if args.csv:
        text = df.map(lambda v: safe(v, multiline=False) if isinstance(v, str) else v)
        text.to_csv(sys.stdout, index=False)
        return 0
    if df.empty:
        print("No model calls in this range.")
        return 0
    table = Table(title=f"Costs by {shown(args.by)}")
    frame = df.drop(columns=["uncached_cost_usd"])  # cost_usd + saved_usd; the CSV keeps it
    for col in frame.columns:
        table.add_column(str(col), justify="right" if frame[col].dtype.kind in "iuf" else "left")
    for rec in frame.itertuples(index=False):
        cells = []
        for col, value in zip(frame.columns, rec, strict=True):
            if col in ("cost_usd", "saved_usd"):
                cells.append(usd(value))
            elif isinstance(value, datetime):
                cells.append(
                    value.strftime("%Y-%m-%d %H:%M") if value.hour or value.minute else f"{value:%Y-%m-%d}"
                )
            else:
                cells.append("" if value is None else shown(value, multiline=False))
        table.add_row(*cells)
    total = df["cost_usd"].sum(min_count=1)
    saved = df["saved_usd"].sum(min_count=1)
    unknown = int(df["unknown_cost_calls"].sum())
    caching = ""
    if saved == saved and saved:  # NaN: no known price; 0: nothing was cached
        what = f"saved {usd(saved)}" if saved > 0 else f"cost {usd(-saved)} more (cache writes)"
        caching = f"; prompt caching {what}, uncached {usd(total + saved)}"
    table.caption = f"total {usd(total)}{caching}" + (
        f"; {unknown} calls with unknown price" if unknown else ""
    )
    new_console().print(table)
    return 0
