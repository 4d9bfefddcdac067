#!/usr/bin/env python3
"""Proves from the machine code that nnlab runs on a CPU with AVX2 and no AVX-512.

The library is compiled for x86-64-v3 (AVX2 + FMA); only the kernels of namespace
nnlab::cpu::avx512 are compiled for AVX-512 and run when devices/cpu/cpu_isa.h chose them.
This script disassembles the given binaries (executables or static libraries) and fails when
an AVX-512 instruction lies in any function whose name does not carry that namespace: such a
function could run on an AVX2-only CPU and die there of SIGILL.

An instruction is AVX-512 when it is EVEX-encoded (in 64-bit code the byte 0x62 can only start
an EVEX prefix) or works on the opmask registers k0-k7 (kmov, kand, kortest, ...: VEX-encoded).
That covers the zmm registers, xmm/ymm 16-31, masking and the AVX-512VL forms of 256-bit code.

  check_isa.py [--objdump PATH] [--expect-avx512] BINARY...
--expect-avx512 also requires some AVX-512 code in the avx512 namespace (the build flags reached it).
Exit status 0 when clean, 1 with a list of offending functions otherwise.
"""
import argparse
import re
import subprocess
import sys

ALLOWED = "nnlab::cpu::avx512::"
# Prefixes an EVEX instruction may carry before its 0x62: address size, segment overrides.
SKIPPABLE_PREFIXES = {"67", "26", "2e", "36", "3e", "64", "65"}
MASK_OPS = re.compile(r"^k(mov|and|andn|or|xor|xnor|not|ortest|test|shiftl|shiftr|unpck|add)[bwdq]*\b")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
# objdump -w: "  addr:\t<bytes>\t<mnemonic> <operands>"
INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t([0-9a-f ]+)\t(\S+)")


def is_avx512(raw_bytes, mnemonic):
    for byte in raw_bytes.split():
        if byte not in SKIPPABLE_PREFIXES:
            return byte == "62" or bool(MASK_OPS.match(mnemonic))
    return False


def scan(objdump, binary):
    """Yields (function, mnemonic) for each function holding AVX-512 code, once per function."""
    listing = subprocess.run([objdump, "-d", "-C", "-w", binary], check=True, capture_output=True, text=True).stdout
    function, reported = "?", False
    for line in listing.splitlines():
        header = FUNCTION.match(line)
        if header:
            function, reported = header.group(1), False
            continue
        instruction = INSTRUCTION.match(line)
        if instruction and not reported and is_avx512(instruction.group(1), instruction.group(2)):
            reported = True
            yield function, instruction.group(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objdump", default="objdump")
    parser.add_argument("--expect-avx512", action="store_true")
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    outside, inside = [], 0
    for binary in args.binaries:
        for function, mnemonic in scan(args.objdump, binary):
            if ALLOWED in function:
                inside += 1
            else:
                outside.append(f"{binary}: {function}: {mnemonic}")
    if outside:
        print(f"{len(outside)} function(s) outside {ALLOWED} hold AVX-512 instructions; an AVX2-only CPU "
              "could run them and die of SIGILL:")
        for entry in outside[:50]:
            print("  " + entry)
        return 1
    if args.expect_avx512 and inside == 0:
        print(f"no AVX-512 instruction in {ALLOWED}: the AVX-512 kernels were not compiled for AVX-512")
        return 1
    print(f"ok: AVX-512 instructions only in {inside} function(s) of {ALLOWED} ({', '.join(args.binaries)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
