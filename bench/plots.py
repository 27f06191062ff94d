"""PNG figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

Line = Sequence[tuple[float, float]]


def time_series(
    path: Path,
    title: str,
    panels: Sequence[tuple[str, Mapping[str, Line]]],
    hlines: Mapping[int, tuple[float, str]] | None = None,
    log_panels: Sequence[int] = (),
    spans: Sequence[tuple[float, float, str]] = (),
) -> Path:
    """Stacked panels sharing the time axis; each panel maps a label to (t, y) points. `spans`: time
    ranges shaded on every panel (a fade, an outage), each labelled once."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), sharex=True, squeeze=False)
    for i, (ylabel, lines) in enumerate(panels):
        ax = axes[i][0]
        for label, points in lines.items():
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, label=label, linewidth=1.3)
        labelled: set[str] = set()
        for t0, t1, text in spans:
            ax.axvspan(t0, t1, color="orange", alpha=0.15, label=None if text in labelled else text)
            labelled.add(text)
        if hlines and i in hlines:
            y, text = hlines[i]
            ax.axhline(y, color="grey", linestyle="--", linewidth=0.8, label=text)
        if i in log_panels:
            ax.set_yscale("log")  # Hybla's cwnd spikes to the clamp; the others stay readable
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    axes[-1][0].set_xlabel("time since connect() [s]")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def grouped_bars(
    path: Path,
    title: str,
    ylabel: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    legend_outside: bool = False,
) -> Path:
    """Bars per group (e.g. BER) with one bar per series (e.g. congestion control); None = no bar.
    legend_outside: the legend right of the axes (many series would hide the bars)."""
    fig, ax = plt.subplots(figsize=(10.5 if legend_outside else 8, 4))
    width = 0.8 / max(1, len(series))
    for k, (label, values) in enumerate(series.items()):
        xs = [i + k * width for i, v in enumerate(values) if v is not None]
        ys = [v for v in values if v is not None]
        ax.bar(xs, ys, width=width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if legend_outside:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    elif len(series) > 5:
        # Many bars per group: the legend goes under the axes, not over the bars.
        ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    else:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def line_grid(
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Mapping[tuple[str, str], Mapping[str, Line]],
    hlines: Mapping[tuple[str, str], Sequence[tuple[float, str]]] | None = None,
    log_x: bool = True,
    log_y: bool = True,
) -> Path:
    """A rows × cols grid of small line plots (e.g. BER × link rate), each mapping label -> (x, y)."""
    fig, axes = plt.subplots(
        len(rows),
        len(cols),
        # at least 7 inches wide so that the title fits over a single column
        figsize=(max(7.0, 3.6 * len(cols)), 2.8 * len(rows) + 0.6),
        squeeze=False,
        sharex=True,
    )
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            ax = axes[i][j]
            for label, points in cells.get((row, col), {}).items():
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, marker="o", markersize=3, label=label, linewidth=1.2)
            for k, (y, text) in enumerate((hlines or {}).get((row, col), ())):
                style = ("grey", "--") if k == 0 else ("tab:red", ":")
                ax.axhline(y, color=style[0], linestyle=style[1], linewidth=0.9, label=text)
            if log_x:
                ax.set_xscale("log")
            if log_y:
                ax.set_yscale("log")
            ax.set_title(f"{col}, {row}", fontsize=9)
            ax.grid(alpha=0.3, which="both")
            if i == len(rows) - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
    # One legend, on the first cell that has something to label (a cell may be empty).
    labelled = [ax for ax in axes.flat if ax.get_legend_handles_labels()[0]]
    if labelled:
        labelled[0].legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
