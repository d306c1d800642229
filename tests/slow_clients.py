"""A client too slow to finish its request, for the servers' read-timeout tests."""

from __future__ import annotations

import socket


def closed_by_server(s: socket.socket, trickle: bytes = b"", rounds: int = 40) -> bool:
    """Trickle ``trickle`` (a byte at a time, 0.25 s apart) until the server closes, at most
    ``rounds`` times; True when it closed."""
    s.settimeout(0.25)
    for i in range(rounds):
        try:
            if trickle:
                s.sendall(trickle[i % len(trickle) : i % len(trickle) + 1])
            if s.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset or broken pipe: closed
            return True
    return False
