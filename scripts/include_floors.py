#!/usr/bin/env python3
"""Lists every project #include of the library and the app, resolved to its file and floor,
and fails on one that runs up a floor (docs/design.md, Floors).

    scripts/include_floors.py [--list] [ROOT]

Floors, lowest first: core, devices, autograd, layers and optim, datasets, apps. An include
is resolved as the compiler resolves it: "x" beside the including file first, then from the
source root; <x> from the CUDA simulator's headers (devices/cuda/sim/include), else it is a
system or third-party header and not listed. "nnlab_commit.h" is generated into the build
tree for apps/environment.cpp (the app's floor). --list prints every resolved include as
`file:line: include -> floor a -> floor b`; without it only the upward ones are printed.
Exit status 1 when any include runs up, or names a project file that does not exist.

The build enforces the same rule (cmake/floors.cmake); this script is the audit that shows
the whole graph, and the CTest test include_floors runs it.
"""
import os
import re
import sys

FLOORS = {"core": 0, "devices": 1, "autograd": 2, "layers": 3, "optim": 3, "datasets": 4, "apps": 5}
NAMES = ["core", "devices", "autograd", "layers/optim", "datasets", "apps"]
GENERATED = {"nnlab_commit.h": "apps"}
SIM_INCLUDE = os.path.join("devices", "cuda", "sim", "include")
SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def floor_of(rel_path):
    return FLOORS.get(rel_path.split(os.sep, 1)[0])


def resolve(root, including, kind, name):
    """The included file relative to root, or None for a header outside the project."""
    candidates = []
    if kind == '"':
        candidates.append(os.path.join(os.path.dirname(including), name))
        candidates.append(name)
    candidates.append(os.path.join(SIM_INCLUDE, name))
    for c in candidates:
        path = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, path)):
            return path
    return None


def main(argv):
    list_all = "--list" in argv
    args = [a for a in argv if a != "--list"]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    edges = upward = missing = 0
    for top in FLOORS:
        for dirpath, _, files in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(files):
                if not f.endswith(SUFFIXES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                src_floor = floor_of(rel)
                with open(os.path.join(root, rel), encoding="utf-8") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        kind, name = m.groups()
                        target = resolve(root, rel, kind, name)
                        if target is None and kind == '"' and name in GENERATED:
                            dst_floor, target = FLOORS[GENERATED[name]], "<build>/generated/" + name
                        elif target is None:
                            if kind == '"':
                                print(f"{rel}:{lineno}: \"{name}\" names no file of the project")
                                missing += 1
                            continue
                        else:
                            dst_floor = floor_of(target)
                        edges += 1
                        up = dst_floor > src_floor
                        upward += up
                        if up or list_all:
                            mark = "  UPWARD" if up else ""
                            print(f"{rel}:{lineno}: {name} -> {target}  "
                                  f"[{NAMES[src_floor]} -> {NAMES[dst_floor]}]{mark}")
    print(f"{edges} project includes resolved; {upward} run up a floor; {missing} unresolved")
    return 1 if upward or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
