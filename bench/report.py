"""Markdown tables from records, spliced into docs/benchmarks.md between markers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from bench.records import SKIPPED, Record

BEGIN = "<!-- BEGIN GENERATED RESULTS (bench/report.py; do not edit by hand) -->"
END = "<!-- END GENERATED RESULTS -->"
HARNESS = "harness"  # the runner's own records (wall time), shown under the table, not in it


def format_value(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _cell(rec: Record | None) -> str:
    if rec is None:
        return ""
    text = format_value(rec.value)
    if rec.value is None and rec.note:
        text += f" ({rec.note})"
    return text.replace("|", "\\|")


def scenario_table(records: Sequence[Record]) -> str:
    """One table per scenario: rows = variants, columns = metric [unit]; skipped variants listed below."""
    variants: list[str] = []
    metrics: list[tuple[str, str]] = []
    cells: dict[tuple[str, str, str], Record] = {}
    skipped: list[Record] = []
    for rec in records:
        if rec.metric == SKIPPED:
            skipped.append(rec)
            continue
        if rec.variant not in variants:
            variants.append(rec.variant)
        key = (rec.metric, rec.unit)
        if key not in metrics:
            metrics.append(key)
        cells[(rec.variant, rec.metric, rec.unit)] = rec
    lines: list[str] = []
    if variants:
        header = ["variant"] + [f"{m} [{u}]" if u else m for m, u in metrics]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for v in variants:
            row = [v] + [_cell(cells.get((v, m, u))) for m, u in metrics]
            lines.append("| " + " | ".join(row) + " |")
    for rec in skipped:
        lines.append(f"\n- skipped `{rec.variant}`: {rec.note}")
    return "\n".join(lines)


def group_by_scenario(records: Iterable[Record]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for rec in records:
        groups.setdefault(rec.scenario, []).append(rec)
    return groups


def generated_section(
    records: Sequence[Record],
    header_note: str,
    plots: dict[str, list[str]],
    extra: dict[str, str] | None = None,
    tables: dict[str, str] | None = None,
) -> str:
    """`tables`: a scenario's own rendering of its records, in place of the generic table."""
    parts = [BEGIN, "", header_note, ""]
    for scenario, recs in group_by_scenario(records).items():
        parts += [f"### {scenario}", ""]
        if extra and scenario in extra:
            parts += [extra[scenario], ""]
        harness = [r for r in recs if r.variant == HARNESS]
        own = [r for r in recs if r.variant != HARNESS]
        parts += [
            tables[scenario] if tables and scenario in tables else scenario_table(own),
            "",
        ]
        for rec in harness:
            parts += [
                f"_{rec.metric.replace('_', ' ')}: {format_value(rec.value)} {rec.unit}_",
                "",
            ]
        for rel in plots.get(scenario, []):
            parts += [f"![{scenario}]({rel})", ""]
    parts.append(END)
    return "\n".join(parts)


def splice(document: str, section: str) -> str:
    """Replace the text between the markers (inclusive); append the section when there are none."""
    start, end = document.find(BEGIN), document.find(END)
    if start == -1 or end == -1 or end < start:
        return document.rstrip("\n") + "\n\n" + section + "\n"
    return document[:start] + section + document[end + len(END) :]


def write_doc(path: Path, section: str) -> None:
    existing = path.read_text() if path.exists() else "# Benchmarks\n"
    path.write_text(splice(existing, section))
