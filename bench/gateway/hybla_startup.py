"""Window growth and goodput of hybla vs cubic vs reno vs bbr on a satlab path (root).

Runs one iperf3 flow per congestion control from the satlab server namespace to the client
namespace (hub -> terminal, the forward satellite direction) and records per-second goodput
and cwnd. Needs `bin/satlab --prefix PREFIX up ...` first; loads hybla with `perigee hybla
load` when missing. Writes bench/results/hybla/<name>.json and, with matplotlib, a plot beside it.

    bin/satlab --prefix hy- up --profile geo-hts
    .venv/bin/python -m bench.gateway.hybla_startup --prefix hy- --seconds 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench/results/hybla"
CLIENT_ADDR = "10.71.1.10"  # satlab client (DEVELOPERS.md addressing)
PORT = 5301
MSS = 1448


def run_flow(prefix: str, cc: str, seconds: int, fq_rate: str, label: str = "") -> dict[str, object]:
    server = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            f"{prefix}client",
            "iperf3",
            "-s",
            "-1",
            "-p",
            str(PORT),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        out = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                f"{prefix}server",
                "iperf3",
                "-c",
                CLIENT_ADDR,
                "-p",
                str(PORT),
                "-C",
                cc,
                "-t",
                str(seconds),
                "-i",
                "1",
                "--json",
                *(["--fq-rate", fq_rate] if fq_rate else []),
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 60,
        )
    finally:
        server.wait(timeout=30)
    data = json.loads(out.stdout)
    ivals = data["intervals"]
    return {
        "cc": cc + (f" paced {fq_rate}" if fq_rate else "") + label,
        "mbit_per_s": [round(i["sum"]["bits_per_second"] / 1e6, 2) for i in ivals],
        "cwnd_segments": [i["streams"][0]["snd_cwnd"] // MSS for i in ivals],
        "goodput_mbit": round(data["end"]["sum_received"]["bits_per_second"] / 1e6, 2),
        "retransmits": data["end"]["sum_sent"].get("retransmits", 0),
    }


def plot(results: list[dict[str, object]], title: str, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for r in results:
        rate = r["mbit_per_s"]
        cwnd = r["cwnd_segments"]
        assert isinstance(rate, list) and isinstance(cwnd, list)
        xs = list(range(1, len(rate) + 1))
        a.plot(xs, rate, marker="o", label=f"{r['cc']} ({r['goodput_mbit']} Mbit/s avg)")
        b.plot(xs, cwnd, marker="o", label=str(r["cc"]))
    a.set_ylabel("sender rate, Mbit/s (per second)")
    a.set_title(title)
    a.legend()
    b.set_ylabel("cwnd, segments")
    b.set_yscale("log")
    b.set_xlabel("seconds since connect")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", default="hy-")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--ccs", default="hybla,cubic,reno,bbr")
    ap.add_argument("--name", default="geo-hts-startup")
    ap.add_argument("--fq-rate", default="", help="cap pacing (SO_MAX_PACING_RATE), e.g. 45M")
    ap.add_argument(
        "--cwnd-max",
        type=int,
        default=None,
        help="hybla cwnd ceiling, segments (perigee hybla set --cwnd-max), reset to 0 after",
    )
    args = ap.parse_args()
    perigee = str(REPO / "bin/perigee")
    subprocess.run([perigee, "hybla", "load"], check=False, stdout=subprocess.DEVNULL)
    label = ""
    if args.cwnd_max is not None:
        subprocess.run(
            [perigee, "hybla", "set", "--cwnd-max", str(args.cwnd_max)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        label = f" cwnd_max {args.cwnd_max}"
    try:
        results = [
            run_flow(
                args.prefix,
                cc,
                args.seconds,
                args.fq_rate,
                label if cc == "hybla" else "",
            )
            for cc in args.ccs.split(",")
        ]
    finally:
        if args.cwnd_max is not None:
            subprocess.run(
                [perigee, "hybla", "set", "--cwnd-max", "0"],
                check=False,
                stdout=subprocess.DEVNULL,
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    plotted = plot(
        results,
        f"satlab {args.prefix}: {args.seconds} s bulk, server -> client",
        RESULTS / f"{args.name}.png",
    )
    print("| cc | goodput Mbit/s | retransmits | cwnd at 1 s / 5 s / end (segments) |")
    print("|---|---|---|---|")
    for r in results:
        cw = r["cwnd_segments"]
        assert isinstance(cw, list)
        print(
            f"| {r['cc']} | {r['goodput_mbit']} | {r['retransmits']} | {cw[0]} / {cw[min(4, len(cw) - 1)]} / {cw[-1]} |"
        )
    if not plotted:
        print("(matplotlib not available: no plot)")


if __name__ == "__main__":
    main()
