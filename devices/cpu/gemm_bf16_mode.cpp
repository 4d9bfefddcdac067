// The CPU's bf16 mode (gemm_bf16.h): whether the CPU has the instructions, the process-wide
// switch of `--math bf16`, the scalar rounding, and the entry that calls the kernel. Compiled
// for the library's baseline, so every function here is safe to call on any CPU; the kernel
// (gemm_bf16_cpu.cpp, AVX-512 BF16) is entered only after the check.
#include <cpuid.h>

#include <atomic>

#include "core/bfloat16.h"
#include "core/error.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/gemm_bf16.h"

namespace nnlab::cpu {

namespace {

std::atomic<bool> g_bf16_products{false};

// AVX-512 F, BW, CD, DQ and VL with the OS saving the zmm state (cpu_isa.h), and BF16:
// CPUID.(EAX=7, ECX=1):EAX bit 5.
bool cpu_has_bf16_instructions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!cpu_has_avx512()) return false;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
  return (a >> 5) & 1u;
}

}  // namespace

bool gemm_bf16_available() {
#if defined(NNLAB_BF16_KERNEL)
  static const bool available = cpu_has_bf16_instructions();
  return available;
#else
  return false;
#endif
}

std::string gemm_bf16_unavailable_reason() {
#if defined(NNLAB_BF16_KERNEL)
  return gemm_bf16_available() ? ""
                               : "this CPU lacks AVX-512 BF16 (Intel Cooper Lake, Sapphire Rapids and later; AMD Zen 4 "
                                 "and later)";
#else
  return "this build of nnlab has no bf16 kernel (not an x86-64 build, or the compiler lacks -mavx512bf16)";
#endif
}

void set_cpu_bf16_products(bool on) {
  NNLAB_CHECK(!on || gemm_bf16_available(), "--math bf16 cannot run on this CPU: ", gemm_bf16_unavailable_reason(),
              "; train in fp32 (the default), or use --math bf16 on a CUDA GPU");
  g_bf16_products = on;
}

bool cpu_bf16_products() { return g_bf16_products; }

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* column_bias, bool relu) {
  NNLAB_CHECK(gemm_bf16_available(), "bf16 products cannot run here: ", gemm_bf16_unavailable_reason());
  avx512::gemm_bf16(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, column_bias, relu);
}

// Scalar twin of the packing's conversion (VCVTNE2PS2BF16): core/bfloat16.h's rounding (nearest,
// ties to even; NaN stays a quiet NaN), except that a denormal input counts as zero (the
// instruction's rule), where a bf16 store keeps it.
float round_to_bf16_flushing(float x) {
  const uint32_t u = bit_cast<uint32_t>(x);
  if ((u & 0x7f800000u) == 0) return bit_cast<float>(u & 0x80000000u);  // ±0 or a denormal: ±0
  return nnlab::round_to_bf16(x);
}

}  // namespace nnlab::cpu
