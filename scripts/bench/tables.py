"""What the benchmarks print: their figures as JSON for machines, or as a table for people.

Every benchmark here ends the same way: ``--json`` prints the figures whole, otherwise an
aligned table (or markdown with ``markdown=True``, for docs/performance.md) whose first
column is the row's name, left-aligned, and the figures right-aligned.
"""

from __future__ import annotations

import json
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


def print_json(figures: object) -> None:
    """The figures as indented JSON on stdout (``--json``)."""
    print(json.dumps(figures, indent=2))
