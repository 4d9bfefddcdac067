#!/bin/sh
# nnlab on emulated CPUs (qemu-user, Debian's qemu-user package): proof by running that the
# AVX2 path holds no AVX-512 instruction, and that CPUs below the baseline are refused cleanly.
#   1. Haswell (AVX2 + FMA, no AVX-512): the automatic choice is avx2, and short trainings of
#      lenet5 (direct convolutions, max-pool) and the cnn (Winograd, small_gemm) run: one
#      AVX-512 instruction on their path would end them with SIGILL.
#   2. Haswell's `nnlab devices` says it has no bf16 products, and --math bf16 is refused in
#      one message (the check itself runs no AVX-512 instruction).
#   3. Haswell with NNLAB_CPU_ISA=avx512: refused with one message.
#   4. Nehalem (no AVX): refused at start-up with one message, not SIGILL.
# The emulation is some 30× slower than the CPU, so the trainings read a tiny data set in
# MNIST's format (128 training and 64 test images of noise) written here.
# Usage: qemu_isa.sh NNLAB_BINARY. Exits 77 (CTest: skipped) without qemu-x86_64.
set -u
nnlab=$1
command -v qemu-x86_64 >/dev/null || { echo "qemu-x86_64 is not installed (apt-get install qemu-user): skipped"; exit 77; }
fail() { printf 'FAILED: %s\n' "$1"; exit 1; }

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
python3 - "$data" <<'PY' || fail "could not write the data set"
import os, random, struct, sys
rng = random.Random(1)
for prefix, count in (("train", 128), ("t10k", 64)):
    with open(os.path.join(sys.argv[1], prefix + "-images-idx3-ubyte"), "wb") as f:  # magic: uint8, 3 dims
        f.write(struct.pack(">IIII", 0x803, count, 28, 28) + bytes(rng.randrange(256) for _ in range(count * 784)))
    with open(os.path.join(sys.argv[1], prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count) + bytes(rng.randrange(10) for _ in range(count)))
PY

for model in lenet5 cnn; do
  out=$(env -u NNLAB_CPU_ISA qemu-x86_64 -cpu Haswell "$nnlab" train --model "$model" --data mnist --data-dir "$data" \
        --max-steps 2 --batch 16 --threads 1 2>&1) || fail "$model on an emulated Haswell (exit $?): $out"
  echo "$out" | grep -q "cpu kernels: avx2 (auto)" || fail "$model on Haswell did not choose avx2: $out"
  echo "ok: $model trains on an emulated Haswell with the avx2 kernels"
done

out=$(qemu-x86_64 -cpu Haswell "$nnlab" devices 2>&1) || fail "devices on an emulated Haswell (exit $?): $out"
echo "$out" | grep -q "bf16 products: not available: this CPU lacks AVX-512 BF16" || fail "bf16 on Haswell: $out"
out=$(qemu-x86_64 -cpu Haswell "$nnlab" train --math bf16 --model mlp --data mnist --data-dir "$data" --max-steps 1 \
      --threads 1 2>&1)
status=$?
[ "$status" -eq 1 ] || fail "--math bf16 on Haswell: exit $status instead of 1: $out"
echo "$out" | grep -q "nnlab: error: --math bf16 cannot run on this CPU: this CPU lacks AVX-512 BF16" ||
  fail "--math bf16 on Haswell: $out"
echo "ok: an emulated Haswell says it has no bf16 products and refuses --math bf16 in one message"

out=$(NNLAB_CPU_ISA=avx512 qemu-x86_64 -cpu Haswell "$nnlab" devices 2>&1) && fail "avx512 forced on Haswell ran: $out"
echo "$out" | grep -q "NNLAB_CPU_ISA asks for the avx512 kernels, but this CPU lacks AVX-512" ||
  fail "forced avx512 on Haswell: $out"
echo "ok: NNLAB_CPU_ISA=avx512 is refused on an emulated Haswell"

out=$(qemu-x86_64 -cpu Nehalem "$nnlab" devices 2>&1)
status=$?
[ "$status" -eq 1 ] || fail "Nehalem: exit $status instead of 1: $out"
[ "$out" = "nnlab: error: this CPU lacks AVX2 and FMA (x86-64-v3), the instruction set nnlab is compiled for; rebuild it for this CPU with cmake -DNNLAB_CPU_BASELINE=x86-64 (much slower kernels)" ] ||
  fail "Nehalem: $out"
echo "ok: an emulated Nehalem (no AVX) is refused at start-up"
