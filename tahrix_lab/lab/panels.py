"""Case panels for notebooks: the flags panel (triage rows) and the fund-flow graph.

Both take a ``load`` callable, so any source can feed them; ``for_case`` wires
them to a workspace::

    flags = FlagsPanel.for_case(ws, case_id).follow(chat)      # opens on the triage roll-up
    graph = FlowGraphPanel.for_case(ws, case_id, max_hops=4, min_usd=1000).follow(chat)
    flags.link(graph)   # a row click highlights its addresses; a flag in a node's details opens its row

``FlagsPanel.for_case(ws, case_id, analyst="ana")`` puts Confirm and Dismiss on
each flag of an opened row: the analyst's own decision, audited under that name
(``ws.annotate``), as the assistant's "please confirm it yourself" asks.

``follow(chat)`` reloads a panel when the assistant's tools report an effect it
cares about (``flags_changed`` for the flags; ``trace_ready``,
``labels_changed``, ``roles_changed`` for the graph). ``graph.focus(address)``
and ``flags.focus(flag_id)`` bring something into view from Python (the chat
links flag ids and addresses through them).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Self

import traitlets

from tahrix_lab.agent.errors import ToolRetry, UserFacingError
from tahrix_lab.lab.graph_panel import FlowGraphPanel, merge_graphs
from tahrix_lab.lab.panel_base import Panel
from tahrix_lab.lab.panel_data import FLAG_COLUMNS, flags_data

log = logging.getLogger(__name__)

DECISIONS = {"confirm_flag": "Confirming", "dismiss_flag": "Dismissing"}


class FlagsPanel(Panel):
    """The case's flags as the assistant sees them: triage rows, each expanding to its raw flags.

    ``load()`` returns what ``Workspace.flag_rows`` (or ``Workspace.triage``) gives, a dict with
    ``rows``; the raw flags of every row are one click away ("Raw flags"). A plain list of flag
    dicts shows as the raw table alone. Clicking a row sends it to ``on_select`` callbacks.
    """

    rows = traitlets.List(traitlets.Dict()).tag(sync=True)  # triage rows
    raw = traitlets.List(traitlets.Dict()).tag(sync=True)  # raw flags: flag_id, flag_type, severity, …
    can_decide = traitlets.Bool(False).tag(sync=True)  # Confirm / Dismiss on each flag of an open row
    # the panel's last decision, {flag_id, action, audit_id}: what its Undo takes back
    last_decision = traitlets.Dict().tag(sync=True)
    refresh_on = frozenset({"flags_changed"})

    def __init__(
        self,
        load: Callable[[], Any],
        *,
        decide: Callable[[str, str], Any] | None = None,
        undo: Callable[[str], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``decide(flag_id, action)`` (``confirm_flag`` or ``dismiss_flag``) records an analyst's
        decision; without it the panel only shows the flags. ``undo(audit_id)`` takes back the
        decision ``decide`` returned ``{"audit_id": ...}`` for (the panel's Undo)."""
        self._on_select: list[Callable[[dict[str, Any]], Any]] = []
        self._decide, self._undo = decide, undo
        super().__init__(load, kind="flags", can_decide=decide is not None, **kwargs)

    @classmethod
    def for_case(
        cls, workspace: Any, case_id: str, *, analyst: str | None = None, **kwargs: Any
    ) -> FlagsPanel:
        """The panel on ``workspace.flag_rows(case_id)``: triage rows with label, chain, amount, time,
        status and a one-line explanation. With ``analyst``, each flag can be confirmed or dismissed
        from the panel, audited under that name, and the last decision undone."""
        kwargs.setdefault("title", f"Flags · {case_id}")
        if analyst:
            kwargs["decide"] = lambda flag_id, action: workspace.annotate(
                case_id, "flag", flag_id, action, analyst=analyst
            )
            kwargs["undo"] = lambda audit_id: workspace.revert(audit_id, actor=analyst, case_id=case_id)
        return cls(lambda: workspace.flag_rows(case_id), **kwargs)

    def decide(self, flag_id: str, action: str) -> None:
        """Record the analyst's ``confirm_flag`` or ``dismiss_flag`` on ``flag_id`` (as the buttons
        do) and reload; a refusal shows in the panel and is raised."""
        if self._decide is None:
            raise ValueError(
                "This panel was made without an analyst: FlagsPanel.for_case(..., analyst=NAME)."
            )
        if action not in DECISIONS:
            raise ValueError(f"action must be one of {sorted(DECISIONS)}, not {action!r}.")
        self.error = ""  # so that a refusal like the last one is still news to the page
        try:
            done = self._decide(flag_id, action)
        except Exception as exc:
            why = getattr(exc, "message", None) or exc
            self.error = f"{DECISIONS[action]} {flag_id} was not recorded: {why}"
            raise
        audit_id = done.get("audit_id") if isinstance(done, dict) and self._undo is not None else None
        self.last_decision = {"flag_id": flag_id, "action": action, "audit_id": audit_id} if audit_id else {}
        self.refresh()

    def undo(self) -> None:
        """Take back the panel's last decision (as its Undo does) and reload; a refusal (the flag
        was decided again since) shows in the panel and is raised."""
        last = self.last_decision
        if not last.get("audit_id") or self._undo is None:
            raise ValueError("There is no decision of this panel to undo.")
        self.error = ""
        try:
            self._undo(last["audit_id"])
        except Exception as exc:
            why = getattr(exc, "message", None) or exc
            self.error = f"Undoing the decision on {last['flag_id']} failed: {why}"
            raise
        finally:
            self.last_decision = {}
        self.refresh()

    def _show(self, data: Any) -> None:
        shown = flags_data(data)
        self.rows, self.raw = shown["rows"], shown["raw"]

    def on_select(self, callback: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """Call ``callback(row)`` when the analyst clicks a row (usable as a decorator)."""
        self._on_select.append(callback)
        return callback

    def select(self, row_id: str) -> dict[str, Any]:
        """Open a row as a click would, and tell the ``on_select`` callbacks."""
        row = next((r for r in self.rows if r.get("row_id") == row_id), None)
        if row is None:
            raise ValueError(f"There is no triage row {row_id!r}.")
        self._request_focus(row_id=row_id)
        for callback in list(self._on_select):
            try:
                callback(row)
            except Exception:
                log.exception("a flags on_select callback failed")
        return row

    def focus(self, flag_id: str) -> str:
        """Open the row that holds ``flag_id`` (a raw flag or a row id) and scroll to it; returns the row id."""
        for r in self.rows:
            ids = {f.get("flag_id") for f in r.get("flags", [])}
            ids |= {f.get("flag_id") for rel in r.get("related", []) for f in rel.get("flags", [])}
            if flag_id == r.get("row_id") or flag_id in ids:
                self._request_focus(row_id=r["row_id"], flag_id=flag_id)
                return str(r["row_id"])
        if any(f.get("flag_id") == flag_id for f in self.raw):
            self._request_focus(flag_id=flag_id)
            return flag_id
        raise ValueError(f"There is no flag {flag_id!r} in this panel.")

    def link(self, graph: FlowGraphPanel) -> Self:
        """A row click highlights its addresses in ``graph``; a flag clicked in the graph opens its row."""
        self.on_select(lambda row: graph.focus(row.get("addresses") or []))
        graph.on_flag(self.focus)
        return self

    def _on_front_end(self, content: dict[str, Any]) -> None:
        if content.get("type") in ("decide", "undo") and self._decide is not None:
            try:  # a refusal shows in the panel (``error``)
                if content["type"] == "undo":
                    self.undo()
                else:
                    self.decide(str(content.get("flag_id")), str(content.get("action")))
            except (UserFacingError, ToolRetry) as exc:  # an unknown flag, an unreachable record
                log.info("flags panel: a decision was not recorded: %s", exc.message)
            except ValueError as exc:  # nothing to undo (a second click)
                log.info("flags panel: %s", exc)
            except Exception:
                log.exception("flags panel: a decision was not recorded")
            return
        if content.get("type") == "select":
            with contextlib.suppress(ValueError):
                row = next(r for r in self.rows if r.get("row_id") == content.get("row_id"))
                for callback in list(self._on_select):
                    try:
                        callback(row)
                    except Exception:
                        log.exception("a flags on_select callback failed")


__all__ = ["FLAG_COLUMNS", "FlagsPanel", "FlowGraphPanel", "merge_graphs"]
