#!/bin/sh
# quickstart.sh - install what is missing, build spmdc, and compile the
# Megatron MLP example on an 8-way `model` axis.
set -eu
cd "$(dirname "$0")/.."
sh tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
./build/spmdc compile examples/mlp.hlo --mesh model=8 -o build/mlp.model8.hlo
echo "per-device program: build/mlp.model8.hlo"
