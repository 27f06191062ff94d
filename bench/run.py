"""`python -m bench.run --quick|--full [--only NAME]`: run scenarios, write results, tables and plots.

Outputs: bench/results/runs/<timestamp>.json (machine, parameters, records, raw series),
bench/results/latest.json (flat record list; scenarios not run this time keep their last records),
docs/benchmarks.md (generated section between markers) and docs/plots/*.png. Only a full run publishes
there: a quick run's figures (`make bench-quick`, the short soak) go to a scratch tree (--output-dir,
default QUICK_OUTPUT_DIR), so they never replace the full run's published tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import hybla, lab, machine, records, report, scenarios
from bench.context import Context
from bench.procs import REPO


class Paths:
    """Where a run publishes; --output-dir sends everything to a scratch tree (CI smoke runs)."""

    def __init__(self, root: Path | None = None) -> None:
        self.results = (root / "results") if root else REPO / "bench/results"
        self.doc = (root / "benchmarks.md") if root else REPO / "docs/benchmarks.md"
        self.plots = (root / "plots") if root else REPO / "docs/plots"
        if root and not self.doc.exists() and (REPO / "docs/benchmarks.md").exists():
            root.mkdir(parents=True, exist_ok=True)
            self.doc.write_text((REPO / "docs/benchmarks.md").read_text())


PATHS = Paths()
# Where a quick run publishes when no --output-dir is given.
QUICK_OUTPUT_DIR = Path("/tmp/perigee-bench-quick")


def run_scenario(mod: ModuleType, mode: str, ctx: Context) -> list[records.Record]:
    params = mod.PARAMS[mode]
    ctx.log(f"scenario {mod.NAME} ({mode}): {params}")
    t0 = time.monotonic()
    try:
        recs: list[records.Record] = mod.run(ctx, params)
    except Exception as exc:  # noqa: BLE001  (one broken scenario must not lose the others)
        traceback.print_exc()
        recs = [records.skipped(mod.NAME, "all", f"scenario failed: {type(exc).__name__}: {exc}"[:300])]
    finally:
        lab.down()
    recs.append(records.measured(mod.NAME, "harness", "scenario_wall_time", time.monotonic() - t0, "s"))
    ctx.log(f"scenario {mod.NAME} done in {time.monotonic() - t0:.0f}s, {len(recs)} records")
    return recs


def merge_latest(previous: list[records.Record], fresh: list[records.Record]) -> list[records.Record]:
    """Records of the scenarios that ran replace theirs; the other scenarios keep their last records."""
    ran = {r.scenario for r in fresh}
    return [r for r in previous if r.scenario not in ran] + fresh


def last_wall_times(latest: list[records.Record]) -> dict[str, float]:
    """Each scenario's wall time in the last results (the harness's own record), in seconds."""
    return {r.scenario: r.value for r in latest if r.metric == "scenario_wall_time" and r.value is not None}


def time_left(remaining: list[str], last_wall: dict[str, float], done_s: list[float]) -> float | None:
    """Seconds the remaining scenarios should take: each one's last wall time, else the mean of the
    scenarios run so far; None while neither is known for one of them."""
    fallback = sum(done_s) / len(done_s) if done_s else None
    total = 0.0
    for name in remaining:
        expected = last_wall.get(name, fallback)
        if expected is None:
            return None
        total += expected
    return total


def progress_line(k: int, n: int, name: str, left_s: float | None) -> str:
    if left_s is None:
        eta = "time left unknown: no earlier wall time"
    else:
        eta = f"about {max(1, round(left_s / 60))} min left"
    return f"scenario {k} of {n}: {name} ({eta})"


def load_latest(path: Path) -> list[records.Record]:
    if not path.exists():
        return []
    try:
        return records.load_list(json.loads(path.read_text()))
    except (ValueError, records.RecordError):
        return []


def plots_for(registry: dict[str, ModuleType]) -> dict[str, list[str]]:
    """Each scenario's figures: docs/plots/<scenario>-*.png, relative to docs/."""
    out: dict[str, list[str]] = {}
    for name in registry:
        out[name] = [f"plots/{p.name}" for p in sorted(PATHS.plots.glob(f"{name}-*.png"))]
    return out


def regenerate_doc(latest: list[records.Record], registry: dict[str, ModuleType], when: str) -> None:
    extra = {}
    tables = {}
    groups = report.group_by_scenario(latest)
    for name, mod in registry.items():
        text = f"**{mod.TITLE}.** {mod.DESCRIPTION}"
        if hasattr(mod, "doc_extra") and name in groups:
            text += "\n\n" + mod.doc_extra(groups[name])
        extra[name] = text
        if hasattr(mod, "doc_tables") and name in groups:
            tables[name] = mod.doc_tables([r for r in groups[name] if r.variant != report.HARNESS])
    note = (
        f"Generated from `bench/results/latest.json` ({when}). Values `n/a` carry the reason; "
        "skipped variants are listed under each table."
    )
    report.write_doc(
        PATHS.doc,
        report.generated_section(latest, note, plots_for(registry), extra, tables),
    )


def one_of_each_kind(registry: dict[str, ModuleType]) -> list[str]:
    """`make bench-quick`: the first scenario (in run order) of each KIND."""
    seen: set[str] = set()
    chosen = []
    for name, mod in registry.items():
        if mod.KIND not in seen:
            seen.add(mod.KIND)
            chosen.append(name)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.run")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--quick",
        action="store_true",
        help=f"one scenario of each kind, quick parameters (results in {QUICK_OUTPUT_DIR} unless --output-dir)",
    )
    mode.add_argument(
        "--full",
        action="store_true",
        help="each scenario's full parameters (about 55 min on 2 cores)",
    )
    parser.add_argument("--only", action="append", help="run only this scenario (repeatable)")
    parser.add_argument(
        "--output-dir",
        help="publish results, page and plots under this directory instead of the repository",
    )
    parser.add_argument(
        "--docs-only",
        action="store_true",
        help="regenerate docs from latest.json, run nothing",
    )
    args = parser.parse_args(argv)
    registry = scenarios.load_all()
    # Opt-in scenarios (the soak) run only when named with --only.
    regular = {n: m for n, m in registry.items() if not getattr(m, "OPT_IN", False)}
    chosen = args.only or (one_of_each_kind(regular) if args.quick else list(regular))
    unknown = [n for n in chosen if n not in registry]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {', '.join(registry)}")
    mode_name = "quick" if args.quick else "full"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    global PATHS
    output_dir = Path(args.output_dir) if args.output_dir else (QUICK_OUTPUT_DIR if args.quick else None)
    PATHS = Paths(output_dir.resolve() if output_dir else None)
    latest_path = PATHS.results / "latest.json"
    if args.docs_only:
        regenerate_doc(load_latest(latest_path), registry, "regenerated")
        return 0

    ctx = Context(mode=mode_name, plots_dir=PATHS.plots)
    run_info: dict[str, Any] = {
        "started": stamp,
        "mode": mode_name,
        "scenarios": chosen,
        "machine": machine.info(),
        "params": {},
        "records": [],
        "raw": ctx.raw,
    }
    fresh: list[records.Record] = []
    last_wall = last_wall_times(load_latest(latest_path))
    done_s: list[float] = []
    try:
        for k, name in enumerate(chosen, 1):
            left = time_left(chosen[k - 1 :], last_wall, done_s)
            ctx.log(progress_line(k, len(chosen), name, left))
            run_info["params"][name] = registry[name].PARAMS[mode_name]
            started = time.monotonic()
            fresh += run_scenario(registry[name], mode_name, ctx)
            done_s.append(time.monotonic() - started)
    finally:
        lab.down()
        hybla.release()
        run_info["records"] = [r.to_json() for r in fresh]
        run_info["finished"] = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (PATHS.results / "runs").mkdir(parents=True, exist_ok=True)
        (PATHS.results / "runs" / f"{stamp}.json").write_text(json.dumps(run_info, indent=1) + "\n")
    latest = merge_latest(load_latest(latest_path), fresh)
    latest_path.write_text(json.dumps([r.to_json() for r in latest], indent=1) + "\n")
    regenerate_doc(
        latest,
        registry,
        f"last run {stamp}, {mode_name}, commit {run_info['machine']['git_commit'][:10]}",
    )
    ctx.log(f"wrote {latest_path}, {PATHS.doc}, {PATHS.results / 'runs' / stamp}.json")
    failed = [r for r in fresh if r.metric == records.SKIPPED and r.variant == "all"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
