#!/usr/bin/env bash
# Each public header (include/pert/*.hpp) compiles alone with only include/ on the path: what a
# program or the Python module includes needs none of the internal headers under src/.
#   public_headers.sh CXX ROOT
set -euo pipefail
cxx=$1 root=$2
check() {
  echo "#include \"pert/$(basename "$1")\"" | "$3" -std=c++17 -fsyntax-only -x c++ -I"$2/include" - ||
    { echo "public_headers: $1 does not compile alone with -I include" >&2; return 1; }
}
export -f check
ls "$root"/include/pert/*.hpp | xargs -P "$(nproc)" -I{} bash -c 'check "$@"' _ {} "$root" "$cxx"
echo "public_headers: $(ls "$root"/include/pert/*.hpp | wc -l) headers, each alone"
