"""docs/ARCHITECTURE.md's module map names every Rust module of the gateway (gateway/crates/*/src): a new module
without its line there fails here, naming it.

The map's code block is a list of boxes; a box starts at an unindented line whose parentheses name its directory
("gateway daemon (crates/perigee/src/gateway; ...)"). A module belongs to the box of the directory its file is in:
a module `m` (m.rs or m/mod.rs) must be named in that box as a word; a module `d/m` (d/m.rs) in a line of that box
that starts with `d/`, with its continuation lines. Test-only modules (`tests`) and the crate roots (lib.rs,
main.rs) are not modules of the map."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CRATES = ROOT / "gateway" / "crates"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
ROOTS = {"lib.rs", "main.rs", "mod.rs"}


def rust_modules() -> list[tuple[str, str]]:
    """(box directory, module) for every module file: ("gateway/crates/dns/src", "probe"),
    ("gateway/crates/perigee/src/gateway", "peer/pin"). A module directory right under src (`gateway/`) is a box of
    its own; deeper ones are listed in their box as `dir/child`."""
    out = []
    for src in sorted(CRATES.glob("*/src")):
        for f in sorted(src.rglob("*.rs")):
            parts = list(f.relative_to(src).parts)
            box = src
            if len(parts) > 1 and (src / parts[0] / "mod.rs").is_file():
                box, parts = src / parts[0], parts[1:]
            path = parts[:-1] if f.name in ROOTS else [*parts[:-1], f.stem]
            if path and "tests" not in path:
                out.append((box.relative_to(ROOT).as_posix(), "/".join(path)))
    return sorted(set(out))


def module_map() -> dict[str, str]:
    """The map's boxes by the directory their header names."""
    text = DOC.read_text()
    section = text[text.index("## Module map") :]
    block = section[section.index("```") + 3 :]
    block = block[: block.index("```")]
    boxes: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in block.splitlines():
        if line and not line[0].isspace():
            m = re.search(r"\((crates/[\w/-]+)", line)
            current = boxes.setdefault(f"gateway/{m.group(1)}", []) if m else None
        if current is not None:
            current.append(line)
    return {box: "\n".join(lines) for box, lines in boxes.items()}


def dir_lines(box: str, directory: str) -> str:
    """The lines of a box that start with `directory/`, with their continuation lines."""
    out, inside = [], False
    for line in box.splitlines():
        body = line.lstrip()
        indent = len(line) - len(body)
        if indent <= 2:
            inside = body.startswith(f"{directory}/")
        if inside:
            out.append(line)
    return "\n".join(out)


def named(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w/-]){re.escape(name)}(?![\w-])", text) is not None


def missing_from_map(boxes: dict[str, str]) -> list[str]:
    missing = []
    for box_dir, module in rust_modules():
        box = boxes.get(box_dir)
        if box is None:
            missing.append(f"{box_dir}: no box in the module map")
            continue
        directory, _, child = module.rpartition("/")
        where = dir_lines(box, directory) if directory else box
        if not named(where, child):
            missing.append(f"{box_dir}/{module}")
    return sorted(set(missing))


def test_the_module_list_sees_the_gateways_modules() -> None:
    found = set(rust_modules())
    daemon = "gateway/crates/perigee/src/gateway"
    for expected in [
        (daemon, "master"),
        (daemon, "peer"),
        (daemon, "peer/pin"),
        (daemon, "worker/admit"),
        (daemon, "routing/vty"),
        (daemon, "control_tls"),
        ("gateway/crates/perigee/src", "hybla_cmd"),
        ("gateway/crates/dns/src", "probe"),
        ("gateway/crates/loadgen/src", "rate"),
    ]:
        assert expected in found, expected
    assert not any(m.endswith("tests") or m in ("lib", "main", "mod") for _, m in found)
    assert not any("fixtures" in m for _, m in found)


def test_every_gateway_module_is_in_the_architecture_map() -> None:
    missing = missing_from_map(module_map())
    assert missing == [], f"docs/ARCHITECTURE.md's module map does not name: {', '.join(missing)}"


def test_a_module_named_only_outside_its_directory_line_is_missing() -> None:
    """The check itself: `peer/pin` named elsewhere in the box but not in its `peer/` line does not count, and a
    top-level module named nowhere in its box is missing."""
    boxes = module_map()
    daemon = "gateway/crates/perigee/src/gateway"
    peer_line = dir_lines(boxes[daemon], "peer")
    assert named(peer_line, "pin")
    without_pin = boxes[daemon].replace(peer_line, peer_line.replace("pin (the pinned", "(the pinned"))
    assert missing_from_map({**boxes, daemon: without_pin + "\n  elsewhere: pin"}) == [f"{daemon}/peer/pin"]
    without_sockdiag = boxes[daemon].replace("sockdiag", "sock_diag")
    assert missing_from_map({**boxes, daemon: without_sockdiag}) == [f"{daemon}/sockdiag"]
