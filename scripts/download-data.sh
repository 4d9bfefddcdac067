#!/usr/bin/env bash
# Downloads MNIST (IDX, gzip) or CIFAR-10 (binary version) into a directory, verifying each
# file against its published checksum. A file whose checksum does not match is deleted and
# the script exits non-zero: nothing unverified is ever left in the output directory.
#
#   scripts/download-data.sh [--mirror URL] [--checksums FILE] mnist|cifar10 DIR
#
# Then train with:  nnlab train --data mnist --data-dir DIR   (or --data cifar10 --data-dir DIR)
#
# Options
#   --mirror URL      base URL replacing the official one (http(s):// or file://); the file
#                     names stay the same. Also read from NNLAB_DATA_MIRROR.
#   --checksums FILE  lines "<md5 or sha256 hex>  <file name>" replacing the built-in
#                     checksums (for mirrors serving other files, and for tests).
#
# Checksums: only MD5 is published for these files. MNIST: the MD5s torchvision lists for
# its ossci-datasets mirror; CIFAR-10: the MD5 on https://www.cs.toronto.edu/~kriz/cifar.html.
set -euo pipefail

usage() {
  echo "usage: scripts/download-data.sh [--mirror URL] [--checksums FILE] mnist|cifar10 DIR" >&2
  exit 2
}

mirror="${NNLAB_DATA_MIRROR:-}"
checksums_file=""
positional=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mirror) [[ $# -ge 2 ]] || usage; mirror="$2"; shift 2 ;;
    --checksums) [[ $# -ge 2 ]] || usage; checksums_file="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "download-data.sh: unknown option $1" >&2; usage ;;
    *) positional+=("$1"); shift ;;
  esac
done
[[ ${#positional[@]} -eq 2 ]] || usage
dataset="${positional[0]}"
out_dir="${positional[1]}"

declare -A checksum
case "$dataset" in
  mnist)
    base="https://ossci-datasets.s3.amazonaws.com/mnist"
    files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
    checksum[train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
    checksum[train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
    checksum[t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
    checksum[t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c
    ;;
  cifar10)
    base="https://www.cs.toronto.edu/~kriz"
    files=(cifar-10-binary.tar.gz)
    checksum[cifar-10-binary.tar.gz]=c32a1d4ab5d03f1284b67883e8d87530
    ;;
  *)
    echo "download-data.sh: unknown data set '$dataset'; choose mnist or cifar10" >&2
    echo "(Fashion-MNIST comes from Debian's dataset-fashion-mnist package.)" >&2
    exit 2
    ;;
esac
if [[ -n "$mirror" ]]; then base="${mirror%/}"; fi

if [[ -n "$checksums_file" ]]; then
  [[ -r "$checksums_file" ]] || { echo "download-data.sh: cannot read checksum file $checksums_file" >&2; exit 2; }
  checksum=()
  while read -r sum name; do
    [[ -z "${sum:-}" || "$sum" == \#* ]] && continue
    checksum["${name#\*}"]="$sum"
  done <"$checksums_file"
fi

# Prints the hex digest of $1 with the algorithm its expected digest's length implies.
digest() {
  case "${#2}" in
    32) md5sum "$1" | cut -d' ' -f1 ;;
    64) sha256sum "$1" | cut -d' ' -f1 ;;
    *) echo "unsupported" ;;
  esac
}

fetch() {  # fetch URL DEST
  case "$1" in
    file://*) cp -- "${1#file://}" "$2" ;;
    *)
      if command -v curl >/dev/null; then curl -fL --retry 3 -o "$2" "$1"
      elif command -v wget >/dev/null; then wget -q -O "$2" "$1"
      else echo "download-data.sh: neither curl nor wget is installed (apt-get install curl)" >&2; return 1
      fi ;;
  esac
}

mkdir -p "$out_dir"
partial="$out_dir/.partial"
mkdir -p "$partial"
trap 'rm -rf "$partial"' EXIT

for name in "${files[@]}"; do
  expected="${checksum[$name]:-}"
  if [[ -z "$expected" ]]; then
    echo "download-data.sh: no checksum known for $name; refusing to download it unverified" >&2
    exit 1
  fi
  if [[ -f "$out_dir/$name" && "$(digest "$out_dir/$name" "$expected")" == "$expected" ]]; then
    echo "$name: already present and verified"
    continue
  fi
  echo "$name: downloading from $base/$name"
  if ! fetch "$base/$name" "$partial/$name"; then
    echo "download-data.sh: could not download $base/$name; check the network or use --mirror" >&2
    exit 1
  fi
  actual="$(digest "$partial/$name" "$expected")"
  if [[ "$actual" != "$expected" ]]; then
    rm -f "$partial/$name" "$out_dir/$name"
    echo "download-data.sh: checksum mismatch for $name: expected $expected, got $actual;" \
         "the file was removed. The download is corrupt or the mirror serves a different file:" \
         "run again, or use another --mirror" >&2
    exit 1
  fi
  mv -f "$partial/$name" "$out_dir/$name"
  echo "$name: verified"
done

if [[ "$dataset" == cifar10 ]]; then
  tar -xzf "$out_dir/cifar-10-binary.tar.gz" -C "$out_dir"
  echo "unpacked into $out_dir/cifar-10-batches-bin"
fi
echo "done: use --data $dataset --data-dir $out_dir"
