#!/usr/bin/env bash
# Configures and builds Missile into build/ (Release). Extra arguments go to cmake.
#   MISSILE_BUILD_DIR  build directory (default: build)
#   MISSILE_BUILD_TARGETS  build only these targets (space-separated; default: all)
#   CI=true            warnings become errors
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${MISSILE_BUILD_DIR:-build}
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMISSILE_WERROR=$werror "$@"
else
  cmake -S . -B "$build_dir" -DMISSILE_WERROR=$werror "$@" >/dev/null
fi
targets=()
[ -n "${MISSILE_BUILD_TARGETS:-}" ] && read -r -a targets <<< "--target $MISSILE_BUILD_TARGETS"
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
