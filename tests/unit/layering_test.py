#!/usr/bin/env python3
"""The generator's stages include only the stages below them, and no production file includes
from tests/. Floors (docs: README "Where things are"): base, measure, padding, frontend (with
onnx/), reference, algorithm, schedules, compile, emit, tune, api, cli. The runtime's public headers and the
generated template header are contracts every floor may include."""
import pathlib
import re
import sys

FLOORS = ["base", "measure", "padding", "frontend", "reference", "algorithm", "schedules",
          "compile", "emit", "tune", "api", "cli"]
CONTRACTS = {"padfold_registry.h", "padfold_runtime.h", "padfold_templates.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def floor_of(path: pathlib.Path, root: pathlib.Path) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if rel[0] == "schedules" else rel[1]


def main(root: pathlib.Path) -> int:
    errors = []
    files = [p for d in ("generator", "schedules") for p in (root / d).rglob("*")
             if p.suffix in (".h", ".cpp")]
    for f in files:
        mine = FLOORS.index(floor_of(f, root))
        for inc in INCLUDE.findall(f.read_text()):
            where = f"{f.relative_to(root)}: #include \"{inc}\""
            if inc in CONTRACTS:
                continue
            first = inc.split("/")[0]
            if "/" not in inc:
                if not (f.parent / inc).exists():
                    errors.append(f"{where}: not beside it, not a contract header")
                continue
            if first not in FLOORS:
                errors.append(f"{where}: not a generator stage (tests/ and others are off limits)")
            elif not ((root / "generator" / inc).exists() or (root / inc).exists()):
                errors.append(f"{where}: no such file in generator/ or schedules/")
            elif FLOORS.index(first) > mine:
                errors.append(f"{where}: {first} is a later stage than {FLOORS[mine]}")
    for e in errors:
        print(e)
    print(f"{len(files)} files checked, {len(errors)} upward or outside includes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
