// The host CPU as the nnlab program sees it: how many threads it trains with, which
// instruction set nnlab's kernels run, which kernels OpenBLAS runs, and how long two cores take
// to hand data over.
//
// Why a header of its own: these live inside the CPU backend (devices/cpu/threads.h,
// cpu_isa.h, openblas_core.h, core_latency.h), next to the kernels and their tuning. The program
// (apps/) needs a handful of them, and only to set them up and to report them; it includes this
// header instead, so the backend's internals can change without the program noticing, and the
// program cannot come to depend on them (scripts/include_floors.py fails on any file outside
// devices/ that includes devices/cpu/). Each function says which backend function it forwards
// to: read that one for the how and why.
#pragma once
#include <optional>
#include <string>

namespace nnlab::host_cpu {

// ---- threads (devices/cpu/threads.h) -----------------------------------------------------
int cores();              // cores this process may run on (affinity mask, cgroup quota): cpu_cores
int physical_cores();     // of those, physical cores (hardware threads of one core count once)
int threads();            // the one OpenMP pool nnlab and OpenBLAS share: cpu_threads
void set_threads(int n);  // n <= 0 means all cores: set_cpu_threads
// Denormal floats are flushed to zero by default, since they cost ~100 cycles per instruction;
// false keeps IEEE gradual underflow (`--denormals keep`): set_cpu_denormals.
void set_flush_denormals(bool flush);
const char* denormals_mode();  // "flush" or "keep"
std::string model_name();      // /proc/cpuinfo's "model name", or "unknown CPU"
const char* openblas_build();  // OpenBLAS's own description of its build

// ---- nnlab's own kernels (devices/cpu/cpu_isa.h) ------------------------------------------
// "avx2" or "avx512". The first call makes the choice, and throws nnlab::Error on a bad
// NNLAB_CPU_ISA or one the CPU lacks, so the program calls it before any work.
const char* kernel_isa();
std::string kernel_isa_reason();  // "auto", "forced by NNLAB_CPU_ISA", "set by the program"
std::string kernel_isa_report();  // one line: "avx512 (auto)"
bool has_avx512();                // AVX-512 F, BW, CD, DQ and VL

// ---- bf16 products (devices/cpu/gemm_bf16.h) ---------------------------------------------
// `--math bf16` on the CPU: Linear layers' and matmul's products on bf16 inputs with float32
// sums (AVX-512 BF16). bf16_available: whether this CPU and build can; why_not says why not.
bool bf16_available();
std::string bf16_unavailable_reason();
void set_bf16_products(bool on);  // throws nnlab::Error where !bf16_available(): set_cpu_bf16_products
bool bf16_products();

// ---- OpenBLAS's kernels (devices/cpu/openblas_core.h) --------------------------------------
// Call first thing in main, before any thread, output or MPI_Init: when OpenBLAS picked an
// older core of kernels than this CPU runs (5x slower products), it starts the program again
// with OPENBLAS_CORETYPE set to the best core. Returns when no restart is needed or possible.
void restart_on_best_openblas_core(char** argv);
// What nnlab found and did, flattened into words for the run record (environment.json).
struct OpenblasCore {
  std::string core;          // the core OpenBLAS runs: "SkylakeX", "Prescott", ...
  std::string instructions;  // what its kernels use: "AVX-512", "SSE3"; "" when unknown
  std::string cpu;           // what the CPU could run, in words: "AVX-512 BF16", "AVX2"
  std::string best;          // the best core for this CPU, "" when none is known
  bool forced = false;       // OPENBLAS_CORETYPE was set when the program was started
  bool older = false;        // `core` is older than `best`
  std::string action;        // "none", "restarted", "kept" or "not_restarted"
  std::string before;        // restarted: the core OpenBLAS ran before; else ""
  std::string summary;       // one sentence, as openblas_core_report() says it
};
OpenblasCore openblas_core();
std::string openblas_core_report();  // the summary sentence alone, for logs

// ---- between two cores (devices/cpu/core_latency.h) ---------------------------------------
// The median round trip of one cache line between the process's first two CPUs, in ns; empty
// on one CPU, or when the other thread could not get its CPU in time. Cloud machines move
// their virtual CPUs between placements where this differs 4x, so reports print it.
std::optional<double> core_round_trip_ns();

}  // namespace nnlab::host_cpu
