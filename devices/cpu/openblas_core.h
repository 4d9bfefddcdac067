// Which kernels OpenBLAS runs, checked against what the CPU can run (docs/library.md, "OpenBLAS's
// kernels").
//
// Why: a DYNAMIC_ARCH build of OpenBLAS (Debian's) picks one "core" of kernels when the library
// loads, from the CPU's family and model numbers; a CPU it does not recognise gets an old core
// silently. On a 16-core Xeon (Cooper Lake, AVX-512) OpenBLAS 0.3.21 chose Prescott, SSE3
// kernels, and ran sgemm at 212 GFLOP/s where its SkylakeX kernels ran 1077. The choice is read
// from OPENBLAS_CORETYPE while the library loads, before main, so the only cure inside a running
// program is to start it again with that variable set: restart_on_best_openblas_core does that.
//
// The ranking is by the instruction set a core's kernels use (SSE < AVX < AVX2 < AVX-512); the
// best core for a CPU is Cooperlake (AVX-512 F/BW/VL/DQ with BF16), SkylakeX (without BF16),
// Haswell (AVX2 and FMA) or Sandybridge (AVX). A core name nnlab does not know is left alone.
#pragma once
#include <string>
#include <string_view>

namespace nnlab {

// The instruction sets of OpenBLAS's x86 cores, oldest first; unknown ranks nowhere.
enum class BlasIsa { unknown, sse, avx, avx2, avx512 };

// What the CPU (and its operating system, which must save the wider registers) can run.
struct CpuVectorSupport {
  bool avx = false;
  bool avx2_fma = false;
  bool avx512 = false;       // F, BW, VL and DQ: what OpenBLAS's SkylakeX kernels use
  bool avx512_bf16 = false;  // and BF16: Cooperlake's
};

// The tier of a core name as openblas_get_corename() or OPENBLAS_CORETYPE spell it, any case.
BlasIsa openblas_core_isa(std::string_view core);
// The instructions a known core's kernels use, for messages ("SSE3", "AVX2"); "" when unknown.
const char* openblas_core_instructions(std::string_view core);
// The best core for `cpu`, or "" when it lacks AVX (then no core beats OpenBLAS's own choice).
const char* best_openblas_core(const CpuVectorSupport& cpu);
// Whether `core` is a known core of a lower tier than the best for `cpu`.
bool openblas_core_is_older(std::string_view core, const CpuVectorSupport& cpu);
// The CPU in words for messages: "AVX-512", "AVX-512 BF16", "AVX2", "AVX", "no AVX".
const char* cpu_vector_words(const CpuVectorSupport& cpu);

// The running machine and library.
CpuVectorSupport cpu_vector_support();
std::string openblas_core_name();  // openblas_get_corename(): "Cooperlake", "Prescott", ...

// The variable that opts out: NNLAB_OPENBLAS_CORETYPE=keep leaves OpenBLAS on the core it chose
// or was given; auto (or unset) lets nnlab correct an older one.
inline constexpr const char* kOpenblasCoretypeOptOut = "NNLAB_OPENBLAS_CORETYPE";

// Call first thing in main, before any thread, output or MPI_Init, with main's own argv. When
// OpenBLAS runs an older core than the CPU supports (whether it chose it or OPENBLAS_CORETYPE
// forced it), it starts the program again in the same process (/proc/self/exe, the same argv
// and PID, so launchers such as mpirun see nothing) with OPENBLAS_CORETYPE set to the best core
// and a marker variable, so it restarts at most once; it returns when no restart is needed,
// possible or wanted. Throws nnlab::Error on an NNLAB_OPENBLAS_CORETYPE other than auto or keep.
void restart_on_best_openblas_core(char** argv);

// What nnlab found and did, for `nnlab devices`, the train log and run records.
enum class OpenblasCoreAction {
  none,           // the best core for this CPU runs, or one nnlab does not rank
  restarted,      // restarted with OPENBLAS_CORETYPE = best
  kept,           // an older core runs because NNLAB_OPENBLAS_CORETYPE=keep asks
  not_restarted,  // an older core runs; `why_not` says why
};
struct OpenblasCoreStatus {
  std::string core;        // the core OpenBLAS runs
  std::string best;        // the best core for this CPU, "" when none is known
  std::string cpu;         // cpu_vector_words
  bool forced = false;     // OPENBLAS_CORETYPE was set when the program was started
  bool older = false;      // `core` is older than `best`
  std::string before;      // restarted: the core OpenBLAS ran before
  OpenblasCoreAction action = OpenblasCoreAction::none;
  std::string why_not;     // not_restarted: the reason
};
OpenblasCoreStatus openblas_core_status();
const char* openblas_core_action_name(OpenblasCoreAction action);  // "none", "restarted", ...
// One sentence: "OpenBLAS chose Prescott (SSE3) on a CPU with AVX-512; restarted with
// OPENBLAS_CORETYPE=SkylakeX".
std::string openblas_core_report(const OpenblasCoreStatus& status);
std::string openblas_core_report();

// Writes one line to stderr, once per process, when an older core runs that the user did not
// keep on purpose, naming the fix (OPENBLAS_CORETYPE=...). set_cpu_threads calls it, so a
// program using the library hears of it before its first product.
void warn_once_if_openblas_core_is_older();

}  // namespace nnlab
