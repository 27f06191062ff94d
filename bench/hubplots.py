"""hub-scale's figures (matplotlib, Agg): the pool setup ramp and new flows around a gateway's SIGKILL."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def setup_ramp(path: Path, title: str, curve: list[tuple[float, int]]) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.4))
    if curve:
        xs, ys = zip(*curve, strict=True)
        ax.plot(xs, ys, linewidth=1.4)
    ax.set_xlabel("seconds since the simulated terminals started")
    ax.set_ylabel("pool connections ready")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def failover(
    path: Path, title: str, series: dict[str, list[tuple[float, int]]], table_s: float | None, bin_s: float
) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.4))
    done, failed = series.get("completed") or [], series.get("failed") or []
    if done:
        xs = [x for x, _ in done]
        ax.bar(xs, [y for _, y in done], width=bin_s, align="edge", color="tab:green", label="new flows completed")
        ax.bar(
            xs,
            [y for _, y in failed],
            width=bin_s,
            align="edge",
            bottom=[y for _, y in done],
            color="tab:red",
            label="new flows failed",
        )
    ax.axvline(0.0, color="black", linewidth=1.0, label="SIGKILL")
    if table_s is not None:
        ax.axvline(table_s, color="grey", linestyle="--", linewidth=1.0, label="first new table at a terminal")
    ax.set_xlabel("seconds since the SIGKILL (by the flow's start)")
    ax.set_ylabel(f"flows per {bin_s:g} s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
