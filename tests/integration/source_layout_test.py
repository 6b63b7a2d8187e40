#!/usr/bin/env python3
"""The house's layout rules for sources (docs/design.md, "Where to look"), and for the tests, checked
on the tree:

- no two files of different layers share a name: a name (without its extension) under src/ and
  include/pert lives in one folder of src/, plus at most its public header include/pert/NAME.hpp;
- every include names its file from one of the two roots, include/ or src/ ("pert/model.hpp",
  "kernels/ops.hpp"), never from the including file's folder or with "../" (the generated word list
  of the retrieval tasks, from the build folder, is the one exception);
- src/io/ reads files and nothing else: what its sources include, and what that includes in turn,
  is io's own, the runtime's or the kernels' (a public header counts as the folder of its source,
  or as what it includes where it has none);
- tests/ holds its CMakeLists.txt (the map) and one folder per kind of test, nothing loose:
  unit/, reference/, integration/, helpers/ and fuzz/ (tests/CMakeLists.txt says what each holds).

    source_layout_test.py     exit 0 when every rule holds, 1 naming each file that breaks one
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = (".cpp", ".hpp", ".inc")
GENERATED = {"ruler_words.inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TEST_KINDS = ("unit", "reference", "integration", "helpers", "fuzz")


def sources():
    for top in ("src", "include"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith(SOURCES):
                    yield os.path.relpath(os.path.join(folder, f), ROOT)


def below_io(name, homes, seen):
    """Whether an include of src/io/ stays in io, the runtime and the kernels, with all it includes.
    homes: {stem: the src/ folders (first level) of its .cpp files}, a public header's layer."""
    if name in seen or name in GENERATED:
        return True
    seen.add(name)
    if name.startswith(("io/", "runtime/", "kernels/")):
        return True
    if not name.startswith("pert/"):
        return False
    stem = os.path.splitext(os.path.basename(name))[0]
    if stem in homes:
        return homes[stem] <= {"io", "runtime", "kernels"}
    text = open(os.path.join(ROOT, "include", name), encoding="utf-8").read()
    return all(below_io(n, homes, seen) for n in INCLUDE.findall(text))


def loose_in_tests():
    """What tests/ holds besides its CMakeLists.txt and the kinds' folders (Python's caches aside)."""
    tests = os.path.join(ROOT, "tests")
    return sorted(e for e in os.listdir(tests) if e not in ("CMakeLists.txt", "__pycache__", *TEST_KINDS))


def main():
    failures = [f"tests/{e}: loose in tests/; it belongs in a kind's folder ({', '.join(k + '/' for k in TEST_KINDS)})"
                for e in loose_in_tests()]
    includes = {path: INCLUDE.findall(open(os.path.join(ROOT, path), encoding="utf-8").read()) for path in sources()}
    folders, homes = collections.defaultdict(set), collections.defaultdict(set)
    for path in includes:
        stem = os.path.splitext(os.path.basename(path))[0]
        folders[stem].add(os.path.dirname(path))
        if path.startswith("src/") and path.endswith(".cpp"):
            homes[stem].add(path.split("/")[1])
    for stem, where in sorted(folders.items()):
        inside = sorted(d for d in where if d != "include/pert")
        if len(inside) > 1:
            failures.append(f"'{stem}' names files in {', '.join(inside)}: one name, one folder (a front end's file says its layer: cli/cmd_NAME.cpp)")
    for path, names in includes.items():
        for name in names:
            if name in GENERATED:
                continue
            if name.startswith("../") or not any(os.path.isfile(os.path.join(ROOT, r, name)) for r in ("include", "src")):
                failures.append(f"{path}: #include \"{name}\": name it from include/ or src/")
            elif path.startswith("src/io/") and not below_io(name, homes, set()):
                failures.append(f"{path}: #include \"{name}\": io/ reads files; that is a layer above it")
    for f in failures:
        print("FAILED:", f)
    print(f"source_layout_test: {len(includes)} files, {len(folders)} names, {len(failures)} broken rules")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
