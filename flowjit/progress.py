"""The progress line the bench harness and the training loop draw on a terminal (and never
when their stream is not one: piped, or in tests)."""

from __future__ import annotations

WIDTH = 24


def on_terminal(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def bar(done: int, total: int, width: int = WIDTH) -> str:
    """``[####....]``: ``done`` of ``total`` as filled cells."""
    filled = width * done // max(1, total)
    return "[" + "#" * filled + "." * (width - filled) + "]"
