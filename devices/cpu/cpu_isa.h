// Which vector instructions nnlab's own CPU kernels use, chosen at run time from what the CPU
// has (docs/library.md, "CPU kernels and instruction sets").
//
// The library is compiled for a portable baseline, x86-64-v3 (AVX2, FMA, BMI1/2, F16C, LZCNT,
// MOVBE: every x86 CPU since Intel Haswell, 2013, and AMD Zen), so it runs on any such CPU. The
// kernels that are faster with AVX-512 (small_gemm, the 2×2 max-pool, the direct and Winograd
// convolutions) are compiled a second time for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) in their own
// namespace, cpu::avx512, beside the baseline's cpu::avx2 (CMakeLists.txt, NNLAB_ISA_SOURCES),
// and devices/cpu/isa_dispatch.cpp calls one or the other.
//
// The choice is made once, on first use: the environment variable NNLAB_CPU_ISA = avx2,
// avx512 or auto (unset = auto: the best the CPU has). A forced instruction set the CPU lacks,
// or any other value, is an error rather than a silent fallback.
#pragma once
#include <string>

namespace nnlab {

enum class CpuIsa { avx2, avx512 };

// The instruction set of the kernels; the first call makes the choice (throws nnlab::Error on a
// bad NNLAB_CPU_ISA, or one the CPU or this build lacks).
CpuIsa cpu_isa();
// Chooses explicitly, overriding the environment (tests, programs using the library); throws
// when the CPU or this build lacks `isa`.
void set_cpu_isa(CpuIsa isa);
// Whether the running CPU (and its operating system, which must save the wider registers) can
// run the kernels of `isa`, and whether this build compiled them.
bool cpu_supports(CpuIsa isa);
bool cpu_has_avx512();           // AVX-512 F, BW, CD, DQ and VL (x86-64-v4); false elsewhere
const char* cpu_isa_name(CpuIsa isa);  // "avx2", "avx512"
// How the choice was made: "auto", "forced by NNLAB_CPU_ISA", "set by the program".
std::string cpu_isa_reason();
// One line for reports: "avx512 (auto)", "avx2 (forced by NNLAB_CPU_ISA)".
std::string cpu_isa_report();

}  // namespace nnlab
