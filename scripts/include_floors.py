#!/usr/bin/env python3
"""Lists every project #include of the library and the app, resolved to its file and floor,
and fails on one that runs up a floor, or that reaches into the CPU backend's internals from
outside devices/ (docs/design.md, Floors).

    scripts/include_floors.py [--list] [ROOT]

Floors, lowest first: core, devices, autograd, layers and optim, datasets, apps. An include
is resolved as the compiler resolves it: "x" beside the including file first, then from the
source root; <x> from the CUDA simulator's headers (devices/cuda/sim/include), else it is a
system or third-party header and not listed. "nnlab_commit.h" is generated into the build
tree for apps/environment.cpp (the app's floor). --list prints every resolved include as
`file:line: include -> floor a -> floor b`; without it only the failing ones are printed.
Exit status 1 when any include runs up, reaches into devices/cpu/ from another floor, or names
a project file that does not exist.

Why the second rule: devices/cpu/ holds the CPU backend's kernels and tuning. Higher floors
reach the CPU through the kernel table (devices/backend.h) and the program through
devices/host_cpu.h, so the backend can change inside without them noticing. The floors alone
allow such an include (devices/ is below them all); this check is what keeps it from coming back.

The build enforces the floors (cmake/floors.cmake) but not the second rule; this script is
the audit that shows the whole graph and checks both, and the CTest test include_floors runs it.
"""
import os
import re
import sys

FLOORS = {"core": 0, "devices": 1, "autograd": 2, "layers": 3, "optim": 3, "datasets": 4, "apps": 5}
NAMES = ["core", "devices", "autograd", "layers/optim", "datasets", "apps"]
GENERATED = {"nnlab_commit.h": "apps"}
SIM_INCLUDE = os.path.join("devices", "cuda", "sim", "include")
SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
# Folders whose headers only their own floor may include: folder -> the floor it belongs to.
INTERNAL = {os.path.join("devices", "cpu"): "devices"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def floor_of(rel_path):
    return FLOORS.get(rel_path.split(os.sep, 1)[0])


def reaches_inside(src, target):
    """Whether `src` includes an internal header of a floor other than its own."""
    return any(target.startswith(folder + os.sep) and floor_of(src) != FLOORS[owner]
               for folder, owner in INTERNAL.items())


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
    edges = upward = inside = missing = 0
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
                        internal = reaches_inside(rel, target)
                        upward += up
                        inside += internal
                        if up or internal or list_all:
                            mark = "  UPWARD" if up else "  INTERNAL" if internal else ""
                            print(f"{rel}:{lineno}: {name} -> {target}  "
                                  f"[{NAMES[src_floor]} -> {NAMES[dst_floor]}]{mark}")
    print(f"{edges} project includes resolved; {upward} run up a floor; "
          f"{inside} reach into another floor's internals; {missing} unresolved")
    return 1 if upward or inside or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
