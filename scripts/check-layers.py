#!/usr/bin/env python3
"""Checks that Strata's layers depend one way (docs/architecture.md, Layers).

Every source file under a layer's folder may include only the public headers
(`strata/<layer>/...`) of the layers listed for it below, and a layer's
CMakeLists.txt may link only those layers' targets. Exit 0 when the tree
follows the table, 1 with one line per breach otherwise. Run from anywhere:
    python3 scripts/check-layers.py
"""
import pathlib
import re
import sys

# layer -> the layers it may use (itself always). The order is the build's.
ALLOWED = {
    "core": [],
    "config": ["core"],
    "plan": ["core"],
    "cost": ["core", "plan"],
    "timeline": ["core", "plan"],
    "planner": ["core", "plan"],
    "report": ["core", "plan", "planner"],
    "simulator": ["core", "plan", "cost", "timeline"],
    "executor": ["core", "plan", "cost", "timeline"],
    "gui": ["core", "config", "plan", "timeline", "planner", "report", "simulator"],
    "cli": ["core", "config", "plan", "cost", "timeline", "planner", "report",
            "simulator", "executor"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"strata/(\w+)/', re.M)
LINK = re.compile(r"\bstrata_(\w+)\b")
# Targets that are not layers (build helpers and a layer's own sub-targets).
TARGET_LAYER = {"core": "core", "config": "config", "plan": "plan", "cost": "cost",
                "timeline": "timeline", "planner": "planner", "report": "report",
                "simulator": "simulator", "executor": "executor", "gui": "gui"}


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    problems = []
    seen = set()
    for layer, uses in ALLOWED.items():  # acyclic: each uses only earlier layers
        problems += [f"check-layers.py: {layer} uses {u}, listed after it" for u in uses
                     if u not in seen]
        seen.add(layer)
    for layer, uses in ALLOWED.items():
        ok = set(uses) | {layer}
        for path in sorted((root / layer).rglob("*")):
            if path.suffix not in {".h", ".cc", ".cu", ".cuh"}:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) not in ok:
                    problems.append(f"{path.relative_to(root)}:{n}: {layer} includes "
                                    f"strata/{m.group(1)}/ (allowed: {', '.join(sorted(ok))})")
        cmake = root / layer / "CMakeLists.txt"
        for n, line in enumerate(cmake.read_text().splitlines(), 1):
            if "target_link_libraries" not in line and not line.startswith(" "):
                continue
            for name in LINK.findall(line.split("#")[0]):
                used = TARGET_LAYER.get(name)
                if used and used not in ok:
                    problems.append(f"{cmake.relative_to(root)}:{n}: {layer} links "
                                    f"strata_{name} (allowed: {', '.join(sorted(ok))})")
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} dependencies against the table "
              "(docs/architecture.md, Layers)")
        return 1
    print(f"check-layers: {len(ALLOWED)} layers depend one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
