"""Loopback servers that speak the providers' wire protocols, for tests and benchmarks.

``server.WireServer`` serves scripted HTTP replies (chunked, optionally cut
off mid-body) and records every request; ``sse`` builds Chat Completions
Server-Sent Events; ``eventstream`` builds AWS event-stream frames with
their CRC32s; ``cassettes`` replays the recorded vectors in
``tests/vectors``.
"""
