"""The optimization calculus's tables: the chain, the walkers sweep and the forward
micro-benchmark as text or markdown, with the machine they ran on."""

from __future__ import annotations

import os
import platform
import subprocess

from calculus_rows import COMPILED_INSIDE, DENSE_GAMES_FACTOR, FELL_BACK, PAYS
from tables import render


def cell(s: dict | None, digits: int = 2, scale: float = 1.0) -> str:
    if s is None:
        return "-"
    median = f"{s['median'] * scale:.{digits}f}"
    if s["min"] == s["max"]:
        return median
    return f"{median} ({s['min'] * scale:.{digits}f}-{s['max'] * scale:.{digits}f})"


ROW_HEADERS = (
    "row",
    "traversal s",
    "advantage s",
    "strategy s",
    "eval s / every",
    "other s",
    "iteration s",
    "x row 1",
    "predicted s (GPU box)",
    "predicted x row 1",
    "compile fit s",
)


PHASE_KEYS = (
    "traversal_s",
    "advantage_train_s",
    "strategy_train_s",
    "eval_amortized_s",
    "other_s",
    "iteration_s",
)


def row_lines(results: list[dict], group: str) -> list[list[str]]:
    lines = []
    for n, r in enumerate((r for r in results if r["group"] == group), start=1):
        label = f"{n}. {r['label']}" if group == "chain" else r["label"]
        predicted = [
            "-" if r["predicted_s"] is None else f"{r['predicted_s']:g}",
            "-" if r["predicted_ratio"] is None else f"{r['predicted_ratio']:.2f}",
        ]
        if r["status"] != "measured":
            lines.append([label, r["status"], *[""] * 6, *predicted, ""])
            continue
        s = r["spread"]
        if r["limit_hits"]:
            label += f" {FELL_BACK}"
        if s["graphs_compiled_measured_fit"]["max"]:
            label += f" {COMPILED_INSIDE}"
        figures = [cell(s[k]) for k in PHASE_KEYS]
        compile_fit = cell(s["compile_fit_s"], 1) if s["compile_fit_s"]["max"] else "-"
        lines.append([label, *figures, cell(r["ratio"]), *predicted, compile_fit])
    return lines


def footnotes(results: list[dict]) -> list[str]:
    notes = []
    fell_back = sorted({hit for r in results for hit in r["limit_hits"]})
    if fell_back:
        notes.append(
            f"{FELL_BACK} dynamo hit its recompile limit in {', '.join(fell_back)}: the "
            "shapes it had not compiled by then ran eagerly."
        )
    inside = [
        f"{r['key']} {r['spread']['graphs_compiled_measured_fit']['median']:.0f}"
        for r in results
        if r["status"] == "measured" and r["spread"]["graphs_compiled_measured_fit"]["max"]
    ]
    if inside:
        notes.append(
            f"{COMPILED_INSIDE} graphs dynamo still compiled in the measured fit (median; their "
            f"compile time is in the phases): {', '.join(inside)}."
        )
    return notes


def sweep_lines(results: list[dict]) -> list[list[str]]:
    lines = []
    for r in (r for r in results if r["group"] == "sweep"):
        if r["status"] != "measured":
            lines.append([r["label"], r["status"], "", "", ""])
            continue
        s = r["spread"]
        lines.append(
            [
                r["label"],
                cell(s["mean_batch"], 0),
                cell(s["traversal_s"]),
                cell(s["nodes_per_s"], 0),
                cell(r.get("gain_over_previous")),
            ]
        )
    return lines


def forward_lines(forward: dict) -> list[list[str]]:
    lines = []
    for e in forward["entries"]:
        eager, compiled = e["eager"], e["compiled"]
        compiled_cells = (
            [cell(compiled["us_per_call"], 0), cell(compiled["us_per_row"], 2)]
            if compiled["us_per_call"]
            else [e["compiled_status"], ""]
        )
        speedup = (
            f"{eager['us_per_call']['median'] / compiled['us_per_call']['median']:.2f}"
            if compiled["us_per_call"]
            else "-"
        )
        lines.append(
            [
                e["preset"],
                str(e["batch"]),
                cell(eager["us_per_call"], 0),
                cell(eager["us_per_row"], 2),
                *compiled_cells,
                speedup,
            ]
        )
    return lines


def report(figures: dict, markdown: bool) -> str:
    setup = figures["setup"]
    work = setup["work"]
    parts = [
        f"Fixed work per row: {work['traversals']} traversals per player, {work['updates']} "
        f"updates of batch {work['batch_size']} per network, evaluation of both policies "
        f"against random and heuristic with {work['games']} games per match (dense rows: "
        f"{work['games'] * DENSE_GAMES_FACTOR}); {work['rules']} rules, sampler "
        f"{setup['sampler']}, {setup['threads']} torch thread(s). Each row: one-iteration "
        "fits (compile rows: a compile fit, then the measured fit; the toggle's warm-up "
        "forwards are left out of the iteration), "
        f"{work['rounds']} round(s), median (min-max). The run took "
        f"{setup['run_minutes']:.0f} min; load average {setup['load_before']} before, "
        f"{setup['load_after']} after; {setup['cpu']}; torch {setup['torch']}, "
        f"commit {setup['commit']}.",
    ]
    for device, block in figures["devices"].items():
        results = block["rows"]
        parts.append(f"{device.upper()}: the chain and the rows past it")
        parts.append(render(ROW_HEADERS, row_lines(results, "chain"), markdown))
        parts.extend(footnotes(results))
        parts.append(
            f"{device.upper()}: walkers (concurrent traversals, "
            f"{work['sweep_traversals']} per player) against the inference batch"
        )
        parts.append(
            render(
                ("row", "mean batch", "traversal s", "nodes/s", "x previous"),
                sweep_lines(results),
                markdown,
            )
        )
        paying = block["largest_paying"]
        if paying:
            parts.append(
                f"Largest walkers whose doubling still paid ({PAYS:.2f}x nodes/s or more): "
                f"{paying['walkers']} (mean inference batch {paying['mean_batch']:.0f})"
            )
        forward = block["forward"]
        parts.append(f"{device.upper()}: forward micro-benchmark ({setup['threads']} thread(s))")
        if forward["status"] != "measured":
            parts.append(forward["status"])
            continue
        parts.append(
            render(
                (
                    "net",
                    "batch",
                    "eager us/call",
                    "eager us/row",
                    "compiled us/call",
                    "compiled us/row",
                    "eager / compiled",
                ),
                forward_lines(forward),
                markdown,
            )
        )
        parts.append(
            "Per-row time stops falling (next batch size gains < 10%) at: "
            + "; ".join(
                f"{c['preset']} {c['mode']} batch {c['batch'] or 'beyond the largest'}"
                for c in forward["crossover"]
            )
        )
    return "\n\n".join(parts)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(__file__),
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
