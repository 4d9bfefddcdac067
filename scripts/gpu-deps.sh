#!/usr/bin/env bash
# Downloads the Debian 12 (bookworm) packages nnlab needs besides CMake, a compiler, CUDA
# and cuDNN into .deps/ (git-ignored; it travels with the checkout to the GPU machine, which
# has no package manager and no network). Run HERE, on a Debian 12 machine with apt:
#     scripts/gpu-deps.sh
# then on the GPU machine:  scripts/gpu-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# The OpenMP build of OpenBLAS (cblas.h + libopenblas.so under .../openblas-openmp/) and its
# runtime (gfortran, quadmath), then the header-only and small libraries nnlab builds with.
# libgomp is not shipped: it comes with the GPU machine's compiler, whose OpenMP runtime
# nnlab links (a second copy in the prefix would shadow it).
packages=(
  libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0
  catch2 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libstb-dev libcli11-dev nlohmann-json3-dev zlib1g-dev zlib1g libssl-dev libssl3
)

. /etc/os-release
if [[ "${VERSION_CODENAME:-}" != bookworm ]]; then
  echo "gpu-deps.sh: this machine runs ${PRETTY_NAME:-an unknown system}; the package list is for Debian 12 (bookworm)" >&2
  exit 1
fi

mkdir -p .deps
cd .deps
rm -f ./*.deb
if ! apt-get download "${packages[@]}"; then
  echo "gpu-deps.sh: apt-get download failed; run 'apt-get update' (as root) and try again" >&2
  exit 1
fi
ls -1 ./*.deb
echo "gpu-deps.sh: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in $(pwd)"

# The GPU machine has no Fashion-MNIST either (no apt, no network): carry Debian's copy
# (dataset-fashion-mnist, about 30 MB) for gpu-build.sh's training smoke test.
data=/usr/share/datasets/fashion-mnist
if ls "$data"/*-ubyte.gz >/dev/null 2>&1; then
  mkdir -p fashion-mnist && cp "$data"/*-ubyte.gz fashion-mnist/
  echo "gpu-deps.sh: Fashion-MNIST copied into $(pwd)/fashion-mnist"
else
  echo "gpu-deps.sh: $data is missing (apt-get install dataset-fashion-mnist); gpu-build.sh will skip its training smoke test" >&2
fi

# Real MNIST too (issue 35's MNIST goal), gzip-compressed (11 MB; the carried folders share a
# 64 MiB limit, which CIFAR-10's 180 MB would break): from the copy `nnlab data fetch mnist`
# installed here. gpu-build.sh installs it there with `nnlab data fetch mnist --from`, which
# checks every file against the same checksums.
store=${NNLAB_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/nnlab/datasets}
if ls "$store"/mnist/*-ubyte >/dev/null 2>&1; then
  mkdir -p mnist && for f in "$store"/mnist/*-ubyte; do gzip -9 -n -c "$f" >"mnist/$(basename "$f").gz"; done
  echo "gpu-deps.sh: MNIST compressed into $(pwd)/mnist"
else
  echo "gpu-deps.sh: no MNIST in $store (run nnlab data fetch mnist first); the GPU machine will have none" >&2
fi
