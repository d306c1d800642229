"""What a report says, gathered from the record and the evidence into plain sections.

A ``Section`` holds blocks that both renderers (HTML, Markdown) draw:
``("p", text)``, ``("finding", dict)``, ``("table", headers, rows)``, ``("svg", markup)``.
A table cell is text, ``("code", text)`` or ``("link", text, anchor)``. Every
amount, time and label printed beside a citation comes from its evidence row,
never from the answer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tahrix_lab.agent.pricing import Pricer
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.case.citations import summary_line, verify_citations
from tahrix_lab.case.db import CaseDB, jsonable
from tahrix_lab.case.report.findings import findings as list_findings
from tahrix_lab.case.report.findings import tool_results
from tahrix_lab.case.report.graph_svg import flow_svg, short

Block = tuple[Any, ...]
TIMELINE_ROWS = 30


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


def money(v: Any) -> str:
    return "unknown" if v is None else f"${float(v):,.2f}"


def amount(v: Any, symbol: str | None) -> str:
    if v is None:
        return "unknown"
    text = f"{float(v):,.6f}".rstrip("0").rstrip(".")
    return f"{text} {symbol or '?'}"


def gather(
    db: CaseDB, store: TranscriptStore, case_id: str, sessions: list[str], trace: dict[str, Any],
    triage: dict[str, Any], version: str,
) -> list[Section]:  # fmt: skip
    case = jsonable(db.one("SELECT * FROM cases WHERE case_id = ?", [case_id]) or {})
    every = list_findings(db, store, case_id, sessions)
    found = [f for f in every if f["status"] != "dropped"]
    dropped = len(every) - len(found)
    results = {s: tool_results(store, s) for s in sessions}
    cites: dict[tuple[str, str], dict[str, Any]] = {}  # one appendix entry per cited value
    for i, f in enumerate(found, 1):
        f["n"] = i
        checked = verify_citations(db, f["text"], case_id, tool_results=results[f["session_id"]])
        f["citations"], f["line"] = [], summary_line(checked["counts"])
        for c in checked["citations"]:
            entry = cites.setdefault((c["kind"], c["value"]), {**c, "findings": []})
            entry["findings"].append(i)
            f["citations"].append(entry)
    for n, entry in enumerate(cites.values(), 1):
        entry["ref"] = f"C{n}"
    counts = {
        s: sum(1 for c in cites.values() if c["status"] == s) for s in ("verified", "close", "not_found")
    }
    edges = _with_native(db, case_id, trace.get("edges") or [])
    return [
        _summary(db, case, case_id, trace, sessions, found, dropped, counts),
        Section("findings", "Findings", [("finding", f) for f in found] or [("p", "No findings from the chosen sessions.")]),
        _graph(trace),
        _exposure(trace, edges),
        _timeline(edges),
        _triage(triage),
        _attribution(db, case_id, trace, cites),
        _citations(cites),
        _evidence(cites),
        _provenance(db, store, case_id, sessions, version),
    ]  # fmt: skip


def _summary(db: CaseDB, case: dict[str, Any], case_id: str, trace: dict[str, Any], sessions: list[str],
             found: list[dict[str, Any]], dropped: int, counts: dict[str, int]) -> Section:  # fmt: skip
    n = (
        db.one(
            "SELECT (SELECT count(*) FROM transactions WHERE case_id = $1) AS transactions, "
            "(SELECT count(*) FROM transfers WHERE case_id = $1) AS transfers, "
            "(SELECT count(*) FROM addresses WHERE case_id = $1) AS addresses, "
            "(SELECT count(*) FROM labels WHERE case_id = $1) AS labels, "
            "(SELECT count(*) FROM anomaly_flags WHERE case_id = $1) AS flags",
            [case_id],
        )
        or {}
    )
    s = trace.get("summary") or {}
    reviewed = {k: sum(1 for f in found if f["status"] == k) for k in ("accepted", "edited", "not reviewed")}
    rows = [
        ["Case", f"{case_id}: {case.get('title', '')}"], ["Incident", f"{case.get('incident_type') or 'unknown'} at {case.get('incident_time') or 'unknown time'}"],
        ["Reported loss", money(case.get("reported_loss_usd"))], ["Status", str(case.get("status") or "")],
        ["Evidence", ", ".join(f"{v:,} {k}" for k, v in n.items())],
        ["Traced from", ", ".join(short(a.split(":", 1)[-1]) for a in (s.get("start") or {}).get("resolved", []))],
        ["Traced USD", f"{money(s.get('traced_usd'))} (reached endpoints {money(s.get('endpoints_usd'))}, "
                       f"still held {money(s.get('held_usd'))}, frontier {money(s.get('frontier_usd'))})"],
        ["Sessions", f"{len(sessions)} ({', '.join(sessions) or 'none'})"],
        ["Findings", f"{len(found)} reported ({reviewed['accepted']} accepted, {reviewed['edited']} edited, "
                     f"{reviewed['not reviewed']} not reviewed); {dropped} dropped by the analyst"],
        ["Citations", summary_line(counts) + " (appendix A)"],
    ]  # fmt: skip
    blocks: list[Block] = [("table", ["", ""], rows)]
    if case.get("summary"):
        blocks.insert(0, ("p", str(case["summary"])))
    return Section("summary", "Summary", blocks)


def _graph(trace: dict[str, Any]) -> Section:
    p = trace.get("params") or {}
    caption = (
        f"{len(trace.get('nodes') or [])} addresses and {len(trace.get('edges') or [])} movements traced "
        f"{p.get('direction', 'forward')} up to {p.get('max_hops')} hops ({p.get('taint_model')} taint, "
        f"movements from {money(p.get('min_usd'))}). Dashed lines are bridge legs; thick borders are endpoints."
    )
    return Section("graph", "Fund-flow graph", [("svg", flow_svg(trace)), ("p", caption)])


def _with_native(db: CaseDB, case_id: str, edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each traced edge with the native amount of its movements (summed from the transfers, per asset)."""
    keys = [e for e in edges if e.get("kind") == "transfer" and e.get("asset_key")]
    rows = db.rows(
        """
        WITH e AS (SELECT unnest($2::INTEGER[]) AS i, unnest($3::VARCHAR[]) AS chain, unnest($4::VARCHAR[]) AS f,
                          unnest($5::VARCHAR[]) AS t, unnest($6::VARCHAR[]) AS asset, unnest($7::TIMESTAMP[]) AS t0,
                          unnest($8::TIMESTAMP[]) AS t1)
        SELECT e.i, sum(x.amount) AS amount, any_value(a.symbol) AS symbol, count(*) AS n FROM e
        JOIN transfers x ON x.case_id = $1 AND x.chain = e.chain AND x.from_address = e.f AND x.to_address = e.t
          AND x.asset_key = e.asset AND x.block_time BETWEEN e.t0 AND e.t1 AND x.status IS NOT FALSE
        LEFT JOIN assets a ON a.asset_key = x.asset_key GROUP BY e.i
        """,
        [case_id, list(range(len(keys))), [e["chain"] for e in keys], [e["from"] for e in keys],
         [e["to"] for e in keys], [e["asset_key"] for e in keys], [_ts(e["first_time"]) for e in keys],
         [_ts(e["last_time"]) for e in keys]],
    )  # fmt: skip
    by_i = {r["i"]: r for r in rows}
    index = {id(e): i for i, e in enumerate(keys)}
    out = []
    for e in edges:
        r = by_i.get(index[id(e)]) if id(e) in index else None
        out.append({**e, "native": r["amount"] if r else None, "symbol": r["symbol"] if r else None})
    return out


def _ts(v: Any) -> Any:
    return str(v).replace("T", " ").rstrip("Z") if v else None


def _exposure(trace: dict[str, Any], edges: list[dict[str, Any]]) -> Section:
    nodes = {n["id"]: n for n in trace.get("nodes") or []}
    native: dict[str, dict[str, float]] = {}
    for e in edges:
        cat = (nodes.get(e["target"]) or {}).get("category")
        if (nodes.get(e["target"]) or {}).get("endpoint") and e.get("native") is not None:
            per = native.setdefault(str(cat), {})
            per[e["symbol"] or "?"] = per.get(e["symbol"] or "?", 0.0) + float(e["native"])
    traced = (trace.get("summary") or {}).get("traced_usd") or 0.0
    rows = []
    for cat, eps in sorted(
        (trace.get("endpoints") or {}).items(), key=lambda kv: -sum(e["tainted_usd"] for e in kv[1])
    ):
        total = sum(e["tainted_usd"] for e in eps)
        nat = "; ".join(amount(v, k) for k, v in sorted(native.get(cat, {}).items())) or "—"
        rows.append(
            [cat, str(len(eps)), nat, money(total), f"{100 * total / traced:.1f} %" if traced else "—"]
        )
    note = ("Native amounts are the movements along the traced edges into each endpoint, summed from the transfer "
            "rows; traced USD is the tainted value the trace attributes to the endpoint.")  # fmt: skip
    headers = ["Endpoint category", "Endpoints", "Native amounts in", "Traced USD", "Share of traced"]
    return Section("exposure", "Exposure by endpoint category", [("table", headers, rows), ("p", note)])


def _timeline(edges: list[dict[str, Any]]) -> Section:
    key = sorted(edges, key=lambda e: (-(e.get("usd") or 0.0), e["source"], e["target"]))[:TIMELINE_ROWS]
    key.sort(key=lambda e: (str(e.get("first_time")), e["source"], e["target"]))
    rows = [
        [_ts(e.get("first_time")) or "unknown", e.get("chain") or "", ("code", short(e["from"])), ("code", short(e["to"])),
         amount(e.get("native"), e.get("symbol")) if e.get("native") is not None else e.get("kind", ""),
         money(e.get("usd")), str(e.get("transfers")), ("code", (e.get("tx_hashes") or [""])[0])]
        for e in key
    ]  # fmt: skip
    headers = ["First movement (UTC)", "Chain", "From", "To", "Amount", "USD", "Transfers", "First tx"]
    return Section("timeline", "Timeline of key movements", [("table", headers, rows)])


def _triage(triage: dict[str, Any]) -> Section:
    rows = []
    for r in triage.get("rows") or []:
        subj = r.get("subject") or {}
        who = subj.get("label") or subj.get("entity") or subj.get("address") or subj.get("kind") or ""
        ids = [f["flag_id"] for f in r.get("flags") or []]
        rows.append([r.get("severity", ""), f"{r.get('score') or 0:.2f}", r.get("role") or "", ("code", str(who)),
                     ", ".join(r.get("flag_types") or []), str(r.get("flag_count")),
                     ", ".join(ids[:4]) + (f" (+{len(ids) - 4})" if len(ids) > 4 else "")])  # fmt: skip
    head = f"{triage.get('rows_total', 0)} triage rows from {triage.get('flags_total', 0)} flags; {triage.get('how', '')}"
    headers = ["Severity", "Score", "Role", "Subject", "Flag types", "Flags", "Flag ids"]
    return Section("triage", "Flag triage", [("p", head), ("table", headers, rows)])


def _attribution(
    db: CaseDB, case_id: str, trace: dict[str, Any], cites: dict[Any, dict[str, Any]]
) -> Section:
    keys = {(n["chain"], n["address"]) for n in trace.get("nodes") or [] if n.get("address")}
    keys |= {(c["match"]["chain"], c["match"]["address"]) for c in cites.values()
             if c.get("match") and c["match"].get("address") and c["match"].get("chain")}  # fmt: skip
    labels = db.labels_for(case_id, sorted(keys))
    rows = []
    for (chain, address), entry in sorted(labels.items()):
        for lab in entry["labels"]:
            best = "yes" if entry["best"] and entry["best"]["label_id"] == lab["label_id"] else ""
            rows.append([chain, ("code", address), lab["label"], lab["category"], lab.get("entity") or "",
                         lab["source"], lab.get("confidence") or "", best, lab["label_id"]])  # fmt: skip
    headers = ["Chain", "Address", "Label", "Category", "Entity", "Source", "Confidence", "Used", "Label id"]
    note = "Every label on an address of the graph or of a citation; 'Used' marks the one the trace and the report rely on."
    return Section("attribution", "Attribution", [("p", note), ("table", headers, rows)])


def _citations(cites: dict[Any, dict[str, Any]]) -> Section:
    rows = [
        [c["ref"], ("code", c["text"]), c["kind"], c["status"].replace("_", " "),
         ", ".join(f"F{n}" for n in c["findings"]),
         ("link", _evidence_text(c), "#ev-" + c["ref"]) if c.get("match") else (c.get("note") or "nothing in the case")]
        for c in cites.values()
    ]  # fmt: skip
    headers = ["Ref", "Cited", "Kind", "Status", "In", "Evidence"]
    return Section("appendix-citations", "Appendix A — Citations checked", [("table", headers, rows)])


def _evidence_text(c: dict[str, Any]) -> str:
    m = c["match"]
    key = (
        m.get(_KEY_OF.get(m["table"], "key")) or m.get("tx_hash") or m.get("address") or m.get("value") or ""
    )
    return f"{m['table']} {key}" + (f" ({c['note']})" if c.get("note") else "")


_KEY_OF = {"transactions": "tx_hash", "transfers": "transfer_id", "anomaly_flags": "flag_id", "labels": "label_id",
           "bridge_events": "bridge_event_id", "addresses": "address", "case_addresses": "address",
           "shortened": "value", "tx": "value", "address": "value", "tool_result": "path"}  # fmt: skip


def _evidence(cites: dict[Any, dict[str, Any]]) -> Section:
    blocks: list[Block] = []
    for c in cites.values():
        if c.get("match"):
            rows = [
                [k, ("code", json.dumps(v) if isinstance(v, dict | list) else str(v))]
                for k, v in c["match"].items()
            ]
            blocks.append(("anchor", "ev-" + c["ref"], f"{c['ref']}: {c['text']}"))
            blocks.append(("table", ["Field", "Value"], rows))
    return Section(
        "appendix-evidence", "Appendix B — Evidence rows", blocks or [("p", "No evidence rows cited.")]
    )


def _provenance(
    db: CaseDB, store: TranscriptStore, case_id: str, sessions: list[str], version: str
) -> Section:
    files = []
    for r in db.rows("SELECT file, format, loaded_at, report, sha256 FROM load_reports WHERE case_id = ? "
                     "ORDER BY loaded_at, file", [case_id]):  # fmt: skip
        rep = json.loads(r["report"]) if r["report"] else {}
        sha = r["sha256"] or _sha256(r["file"])
        files.append([("code", Path(r["file"]).name), r["format"], str(jsonable(r["loaded_at"])), ("code", sha),
                      *(str(rep.get(k, "")) for k in ("rows read", "inserted", "merged", "skipped", "conflicting"))])  # fmt: skip
    dets = [[r["flag_type"], r["detector_version"] or "", str(r["n"]), ("code", r["params"] or "{}")] for r in db.rows(
        "SELECT flag_type, detector_version, params, count(*) AS n FROM anomaly_flags WHERE case_id = ? "
        "GROUP BY ALL ORDER BY flag_type, detector_version, params", [case_id])]  # fmt: skip
    pricer, calls = Pricer(), []
    for sid in sessions:
        s = store.get_session(sid)
        msgs = [m for m in store.load_messages(sid) if m.role == "assistant"]
        costs = [pricer.price_message(m)[0] for m in msgs]
        cost = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
        tin = sum(m.usage.input_tokens or 0 for m in msgs if m.usage)
        tout = sum(m.usage.output_tokens or 0 for m in msgs if m.usage)
        calls.append([("code", sid), s.title or "", s.user, str(jsonable(s.created_at)),
                      ", ".join(sorted({m.model_id or "?" for m in msgs})), ", ".join(sorted({m.backend or "?" for m in msgs})),
                      str(len(msgs)), f"{tin:,} / {tout:,}", "unknown" if cost is None else f"${cost:.4f}"])  # fmt: skip
    return Section("provenance", "Appendix C — Provenance", [
        ("h", "Evidence files"),
        ("table", ["File", "Format", "Loaded", "SHA-256", "Rows read", "Inserted", "Merged", "Skipped", "Conflicting"], files),
        ("p", "A SHA-256 the load did not record is computed from the file as it is now (marked 'now:'); "
              "'file missing' when the file is gone."),
        ("h", "Detectors"), ("table", ["Flag type", "Detector version", "Flags", "Parameters"], dets),
        ("h", "Sessions"),
        ("table", ["Transcript id", "Title", "User", "Started", "Model", "Provider", "Model calls",
                   "Tokens in / out", "Cost"], calls),
        ("p", f"Software: tahrix_lab {version}."),
    ])  # fmt: skip


def _sha256(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        return "file missing"
    h = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "now:" + h.hexdigest()
