#!/usr/bin/env bash
# Builds the package's wheels once per test run (CTest fixture python_wheel) into OUT_DIR: `pip wheel` of
# the repository (pyproject.toml) by the Python the build tree's module is for (VIT_BUILD_PYTHON), and by
# pyenv's Python of each version in VIT_WHEEL_PYTHONS (default 3.12) where pyenv has one; test_wheel.py
# and the Spark test install them. Each Python keeps its own CMake build folder under OUT_DIR/../wheel-build,
# so a second run compiles only what changed, and ccache, where installed, gives the second Python the
# engine's objects the first compiled.
#   build_wheels.sh OUT_DIR
set -euo pipefail
out=$1
src=${VIT_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builds=$(dirname "$out")/wheel-build
rm -rf "$out"
mkdir -p "$out" "$builds"
pythons=("${VIT_BUILD_PYTHON:-python3}")
for version in ${VIT_WHEEL_PYTHONS-3.12}; do
  found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python3 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$found" ]; then
    pythons+=("$found")
  else
    echo "no Python $version under pyenv: its wheel is not built (test_wheel.py skips it)"
  fi
done
settings=()
if command -v ccache >/dev/null; then
  settings+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
             --config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
for python in "${pythons[@]}"; do
  tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  start=$SECONDS
  "$python" -m pip wheel --no-deps --disable-pip-version-check -q -w "$out" \
    --config-settings=build-dir="$builds/$tag" "${settings[@]}" "$src"
  echo "$tag: $(cd "$out" && ls -- *-"$tag"-*.whl) built by $python in $((SECONDS - start)) s"
done
