"""The HTTP API: routes (``api``), request and answer models (``models``), the fast paths."""
