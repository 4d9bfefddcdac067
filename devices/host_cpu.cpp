// The host CPU's public face (host_cpu.h): each function forwards to the CPU backend, which
// holds the mechanism and the measurements behind it.
#include "devices/host_cpu.h"

#include "devices/cpu/core_latency.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/gemm_bf16.h"
#include "devices/cpu/openblas_core.h"
#include "devices/cpu/threads.h"

namespace nnlab::host_cpu {

int cores() { return cpu_cores(); }
int physical_cores() { return cpu_physical_cores(); }
int threads() { return cpu_threads(); }
void set_threads(int n) { set_cpu_threads(n); }
void set_flush_denormals(bool flush) { set_cpu_denormals(flush ? Denormals::flush : Denormals::keep); }
const char* denormals_mode() { return denormals_name(cpu_denormals()); }
std::string model_name() { return cpu_model_name(); }
const char* openblas_build() { return nnlab::openblas_build(); }

const char* kernel_isa() { return cpu_isa_name(cpu_isa()); }
std::string kernel_isa_reason() { return cpu_isa_reason(); }
std::string kernel_isa_report() { return cpu_isa_report(); }
bool has_avx512() { return cpu_has_avx512(); }

bool bf16_available() { return cpu::gemm_bf16_available(); }
std::string bf16_unavailable_reason() { return cpu::gemm_bf16_unavailable_reason(); }
void set_bf16_products(bool on) { cpu::set_cpu_bf16_products(on); }
bool bf16_products() { return cpu::cpu_bf16_products(); }

void restart_on_best_openblas_core(char** argv) { nnlab::restart_on_best_openblas_core(argv); }

OpenblasCore openblas_core() {
  const OpenblasCoreStatus s = openblas_core_status();
  OpenblasCore core;
  core.core = s.core;
  core.instructions = openblas_core_instructions(s.core);
  core.cpu = s.cpu;
  core.best = s.best;
  core.forced = s.forced;
  core.older = s.older;
  core.action = openblas_core_action_name(s.action);
  core.before = s.before;
  core.summary = nnlab::openblas_core_report(s);
  return core;
}

std::string openblas_core_report() { return nnlab::openblas_core_report(); }

std::optional<double> core_round_trip_ns() { return nnlab::core_round_trip_ns(); }

}  // namespace nnlab::host_cpu
