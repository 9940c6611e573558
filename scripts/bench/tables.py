"""The benchmarks' tables for people (``--json`` prints their figures whole instead).

An aligned table, or markdown with ``markdown=True`` for docs/performance.md: the first
column is the row's name, left-aligned, and the figures right-aligned.
"""

from __future__ import annotations

from collections.abc import Sequence


def render(
    headers: Sequence[str], lines: Sequence[Sequence[object]], markdown: bool = False
) -> str:
    """``lines`` under ``headers``: aligned columns, or a markdown table."""
    if markdown:
        rule = ["---"] + ["---:"] * (len(headers) - 1)
        return "\n".join(
            "| " + " | ".join(map(str, cells)) + " |" for cells in [headers, rule, *lines]
        )
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *lines, strict=True)]
    return "\n".join(
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()
        for cells in [headers, *lines]
    )
