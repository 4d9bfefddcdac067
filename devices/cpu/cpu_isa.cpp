// Detecting the CPU's vector instructions and choosing the kernels' instruction set
// (cpu_isa.h). This file is compiled for plain x86-64 (CMakeLists.txt), not for the library's
// x86-64-v3 baseline: its start-up check runs on CPUs that lack the baseline, to say so.
#include "devices/cpu/cpu_isa.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NNLAB_X86 1
#endif

namespace nnlab {

namespace {

#if defined(NNLAB_X86)
bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

// XCR0 (read with xgetbv): which register state the operating system saves on a context switch.
// A CPU may have AVX or AVX-512 while its OS leaves those registers out; then they cannot be used.
unsigned long long os_saved_state() {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

struct Features {
  bool v3 = false;      // x86-64-v3: AVX, AVX2, FMA, BMI1, BMI2, F16C, LZCNT, MOVBE (+ the OS saves ymm)
  bool avx512 = false;  // x86-64-v4: AVX-512 F, BW, CD, DQ, VL (+ the OS saves zmm and the masks)
};

// CPUID leaf 1 (ecx), leaf 7 subleaf 0 (ebx) and leaf 0x80000001 (ecx), bits from Intel's SDM.
Features detect() {
  Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = bit(c, 12), movbe = bit(c, 22), osxsave = bit(c, 27), avx = bit(c, 28), f16c = bit(c, 29);
  if (!osxsave || !avx) return f;
  const unsigned long long xcr0 = os_saved_state();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool os_zmm = (xcr0 & 0xE6) == 0xE6;   // and the opmask, upper-zmm and zmm16-31 state
  unsigned b7 = 0;
  if (__get_cpuid_count(7, 0, &a, &b7, &c, &d) == 0) b7 = 0;
  unsigned c81 = 0;
  if (__get_cpuid(0x80000001, &a, &b, &c81, &d) == 0) c81 = 0;
  const bool bmi1 = bit(b7, 3), avx2 = bit(b7, 5), bmi2 = bit(b7, 8), lzcnt = bit(c81, 5);
  f.v3 = os_ymm && fma && movbe && f16c && avx2 && bmi1 && bmi2 && lzcnt;
  const bool f512 = bit(b7, 16), dq = bit(b7, 17), cd = bit(b7, 28), bw = bit(b7, 30), vl = bit(b7, 31);
  f.avx512 = f.v3 && os_zmm && f512 && dq && cd && bw && vl;
  return f;
}
#endif

const Features& features() {
  static const Features f = detect();
  return f;
}

// The choice: made on first use from NNLAB_CPU_ISA (a function-local static, so the first
// use may come from any thread), or later by set_cpu_isa.
struct Choice {
  CpuIsa isa;
  const char* reason;
};
Choice choose_from_environment();

Choice& choice() {
  static Choice made = choose_from_environment();
  return made;
}

void require_support(CpuIsa isa, const char* who) {
  if (cpu_supports(isa)) return;
#if !defined(NNLAB_AVX512_KERNELS)
  if (isa == CpuIsa::avx512) fail(who, " asks for the avx512 kernels, but this build of nnlab has none (not an x86-64 "
                                   "build, or the compiler lacks -march=x86-64-v4); use avx2 or auto");
#endif
  fail(who, " asks for the ", cpu_isa_name(isa), " kernels, but this CPU lacks ",
       isa == CpuIsa::avx512 ? "AVX-512 (F, BW, CD, DQ and VL)" : "AVX2 and FMA",
       "; use auto (or leave NNLAB_CPU_ISA unset) to run the best kernels it has");
}

Choice choose_from_environment() {
  const char* value = std::getenv("NNLAB_CPU_ISA");
  const CpuIsa best = cpu_supports(CpuIsa::avx512) ? CpuIsa::avx512 : CpuIsa::avx2;
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return {best, "auto"};
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512})
    if (std::strcmp(value, cpu_isa_name(isa)) == 0) {
      require_support(isa, "NNLAB_CPU_ISA");
      return {isa, "forced by NNLAB_CPU_ISA"};
    }
  fail("NNLAB_CPU_ISA='", value, "' is not an instruction set nnlab has kernels for: use avx2, avx512 or auto");
}

}  // namespace

bool cpu_has_avx512() {
#if defined(NNLAB_X86)
  return features().avx512;
#else
  return false;
#endif
}

bool cpu_supports(CpuIsa isa) {
#if defined(NNLAB_X86)
#if defined(NNLAB_BASELINE_X86_64_V3)
  if (isa == CpuIsa::avx2) return features().v3;
#else
  if (isa == CpuIsa::avx2) return true;  // a build for an older baseline (-DNNLAB_CPU_BASELINE)
#endif
#if defined(NNLAB_AVX512_KERNELS)
  return features().avx512;
#else
  return false;
#endif
#else
  return isa == CpuIsa::avx2;  // elsewhere "avx2" names the one, portable set of kernels
#endif
}

const char* cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::avx512 ? "avx512" : "avx2"; }

CpuIsa cpu_isa() { return choice().isa; }

void set_cpu_isa(CpuIsa isa) {
  require_support(isa, "set_cpu_isa");
  choice() = {isa, "set by the program"};
}

std::string cpu_isa_reason() { return choice().reason; }

std::string cpu_isa_report() { return std::string(cpu_isa_name(cpu_isa())) + " (" + cpu_isa_reason() + ")"; }

#if defined(NNLAB_X86) && defined(NNLAB_BASELINE_X86_64_V3)
namespace {
// Runs before main and before the library's other static initialisers (priority 101 comes
// first), which are compiled for x86-64-v3 and may already use AVX2: on a CPU without it the
// program would otherwise die of SIGILL ("Illegal instruction") somewhere at random.
__attribute__((constructor(101))) void refuse_cpus_below_the_baseline() {
  if (features().v3) return;
  std::fputs("nnlab: error: this CPU lacks AVX2 and FMA (x86-64-v3), the instruction set nnlab is compiled for; "
             "rebuild it for this CPU with cmake -DNNLAB_CPU_BASELINE=x86-64 (much slower kernels)\n",
             stderr);
  std::_Exit(1);
}
}  // namespace
#endif

}  // namespace nnlab
