"""The base of the case panels: a ``load`` callable, refresh, and following a chat's effects.

``follow(chat)`` registers ``chat.on_effect`` so a panel reloads when the
assistant's tools report an effect it cares about. Pass ``refresh_on=[...]``
to choose the effect types, or ``"all"`` for every effect. The last effect
seen is kept in ``panel.last_effect`` for loaders that want it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Self

import anywidget
import traitlets

from tahrix_lab.flow.resources import widget_bundle, widget_file

log = logging.getLogger("tahrix_lab.lab.panels")


class Panel(anywidget.AnyWidget):
    # each module after what it imports; the graph panel adds its library
    _esm = widget_bundle(
        "panel_kit.js", "flags.js", "graph_model.js", "graph_details.js", "graph.js", "panels.js"
    )
    _css = widget_file("panels.css").read_text(encoding="utf-8")

    kind = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    # {"n": counter, ...}: what the front end should bring into view (a new dict each time)
    focus_request = traitlets.Dict().tag(sync=True)

    refresh_on: frozenset[str] | None = None

    def __init__(
        self,
        load: Callable[[], Any],
        *,
        title: str = "",
        refresh_on: Iterable[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        if not callable(load):
            raise TypeError(f"load must be a callable returning the panel's data, not {type(load).__name__}.")
        self._load = load
        if refresh_on == "all":
            self.refresh_on = None
        elif refresh_on is not None:
            self.refresh_on = frozenset(refresh_on)
        self.last_effect: dict[str, Any] | None = None
        self._focus_n = 0
        super().__init__(title=title, **kwargs)
        self.on_msg(self._on_message)
        self.refresh()

    def refresh(self) -> None:
        """Call ``load`` again and redraw; a failure shows a calm message in the panel."""
        try:
            data = self._load()
            self._show(data)
        except Exception as exc:
            log.exception("%s: load failed", type(self).__name__)
            self.error = f"Could not load this panel's data: {exc}"
            return
        self.error = ""

    def follow(self, chat: Any) -> Self:
        """Refresh whenever ``chat`` (a ChatWidget) reports a matching effect; returns the panel."""
        chat.on_effect(self._on_effect)
        return self

    def _on_effect(self, effect: dict[str, Any]) -> None:
        if self.refresh_on is None or effect.get("type") in self.refresh_on:
            self.last_effect = effect
            self.refresh()

    def _request_focus(self, **what: Any) -> None:
        self._focus_n += 1
        self.focus_request = {"n": self._focus_n, **what}

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict):
            self._on_front_end(content)

    def _on_front_end(self, content: dict[str, Any]) -> None:
        """A message from the page (a click); subclasses act on the types they know."""

    def _show(self, data: Any) -> None:
        raise NotImplementedError
