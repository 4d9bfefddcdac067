// OpenBLAS's core of kernels against the CPU's instruction sets, and the restart that corrects
// an older one (openblas_core.h).
#include "devices/cpu/openblas_core.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"

extern "C" {
char* openblas_get_corename(void);
char* openblas_get_config(void);
}

namespace nnlab {

namespace {

struct CoreName {
  const char* name;
  BlasIsa isa;
  const char* instructions;
};

// The x86-64 cores of OpenBLAS 0.3.21's DYNAMIC_ARCH (driver/others/dynamic.c, its corename
// table), by the newest instructions their kernels use. Steamroller's kernels use AVX and FMA3,
// not AVX2, yet rank with Haswell: OpenBLAS picks it only on AMD's own Steamroller CPUs, whose
// best core it is, and no measurement says Haswell's kernels would beat it there.
constexpr CoreName kCores[] = {
    {"Katmai", BlasIsa::sse, "SSE"},          {"Coppermine", BlasIsa::sse, "SSE"},
    {"Northwood", BlasIsa::sse, "SSE2"},      {"Prescott", BlasIsa::sse, "SSE3"},
    {"Banias", BlasIsa::sse, "SSE2"},         {"Atom", BlasIsa::sse, "SSSE3"},
    {"Core2", BlasIsa::sse, "SSSE3"},         {"Penryn", BlasIsa::sse, "SSE4.1"},
    {"Dunnington", BlasIsa::sse, "SSE4.1"},   {"Nehalem", BlasIsa::sse, "SSE4.2"},
    {"Athlon", BlasIsa::sse, "SSE"},          {"Opteron", BlasIsa::sse, "SSE2"},
    {"Opteron_SSE3", BlasIsa::sse, "SSE3"},   {"Opteron(SSE3)", BlasIsa::sse, "SSE3"},
    {"Barcelona", BlasIsa::sse, "SSE4a"},     {"Nano", BlasIsa::sse, "SSE3"},
    {"Bobcat", BlasIsa::sse, "SSE4a"},        {"Sandybridge", BlasIsa::avx, "AVX"},
    {"Bulldozer", BlasIsa::avx, "AVX"},       {"Piledriver", BlasIsa::avx, "AVX"},
    {"Haswell", BlasIsa::avx2, "AVX2"},       {"Zen", BlasIsa::avx2, "AVX2"},
    {"Steamroller", BlasIsa::avx2, "AVX"},    {"Excavator", BlasIsa::avx2, "AVX2"},
    {"SkylakeX", BlasIsa::avx512, "AVX-512"}, {"Cooperlake", BlasIsa::avx512, "AVX-512 BF16"},
    {"SapphireRapids", BlasIsa::avx512, "AVX-512 BF16"},
};

const CoreName* find_core(std::string_view core) {
  for (const CoreName& c : kCores)
    if (core.size() == std::strlen(c.name) && strncasecmp(core.data(), c.name, core.size()) == 0) return &c;
  return nullptr;
}

// The marker of a restart: "<core before>" when OpenBLAS chose it, "<core before>,forced" when
// OPENBLAS_CORETYPE did. Its presence stops a second restart.
constexpr const char* kRestartMarker = "NNLAB_OPENBLAS_RESTARTED";
constexpr const char* kForcedSuffix = ",forced";

// What restart_on_best_openblas_core found at start-up; `checked` false when it was not called.
struct StartUp {
  bool checked = false;
  OpenblasCoreAction action = OpenblasCoreAction::none;
  bool forced = false;
  std::string before;
  std::string why_not;
};
StartUp& start_up() {
  static StartUp s;
  return s;
}

bool keep_requested() {
  const char* value = std::getenv(kOpenblasCoretypeOptOut);
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return false;
  if (std::strcmp(value, "keep") == 0) return true;
  fail(kOpenblasCoretypeOptOut, "='", value, "' is not a choice: use keep (leave OpenBLAS on the core it runs) or auto "
       "(the default: restart on the best core for this CPU when OpenBLAS runs an older one)");
}

// A DYNAMIC_ARCH build reads OPENBLAS_CORETYPE; a build for one CPU has no other kernels.
bool openblas_reads_coretype() { return std::strstr(openblas_get_config(), "DYNAMIC_ARCH") != nullptr; }

std::string named(const std::string& core) {
  const char* instructions = openblas_core_instructions(core);
  return *instructions ? core + " (" + instructions + ")" : core;
}

}  // namespace

BlasIsa openblas_core_isa(std::string_view core) {
  const CoreName* c = find_core(core);
  return c ? c->isa : BlasIsa::unknown;
}

const char* openblas_core_instructions(std::string_view core) {
  const CoreName* c = find_core(core);
  return c ? c->instructions : "";
}

const char* best_openblas_core(const CpuVectorSupport& cpu) {
  if (cpu.avx512) return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return "";
}

bool openblas_core_is_older(std::string_view core, const CpuVectorSupport& cpu) {
  const BlasIsa isa = openblas_core_isa(core);
  const char* best = best_openblas_core(cpu);
  return isa != BlasIsa::unknown && *best != '\0' && isa < openblas_core_isa(best);
}

const char* cpu_vector_words(const CpuVectorSupport& cpu) {
  if (cpu.avx512) return cpu.avx512_bf16 ? "AVX-512 BF16" : "AVX-512";
  if (cpu.avx2_fma) return "AVX2";
  return cpu.avx ? "AVX" : "no AVX";
}

CpuVectorSupport cpu_vector_support() {
  CpuVectorSupport cpu;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's answers count AVX and AVX-512 only where the operating system saves their
  // registers (XCR0), as OpenBLAS's kernels need.
  __builtin_cpu_init();
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2_fma = cpu.avx && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512 = cpu.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return cpu;
}

std::string openblas_core_name() { return openblas_get_corename(); }

void restart_on_best_openblas_core(char** argv) {
  StartUp& s = start_up();
  s = StartUp{};
  s.checked = true;
  const bool keep = keep_requested();
  const std::string core = openblas_core_name();
  const char* best = best_openblas_core(cpu_vector_support());
  if (const char* marker = std::getenv(kRestartMarker)) {
    // This process is the restart. The marker goes, so programs it starts decide for themselves
    // (they inherit the corrected OPENBLAS_CORETYPE).
    std::string before = marker;
    s.forced = before.size() > std::strlen(kForcedSuffix) &&
               before.compare(before.size() - std::strlen(kForcedSuffix), std::string::npos, kForcedSuffix) == 0;
    if (s.forced) before.resize(before.size() - std::strlen(kForcedSuffix));
    s.before = before;
    unsetenv(kRestartMarker);
    if (openblas_core_is_older(core, cpu_vector_support())) {
      s.action = OpenblasCoreAction::not_restarted;
      s.why_not = std::string("even after a restart with OPENBLAS_CORETYPE=") + best +
                  ", which this OpenBLAS may lack";
    } else {
      s.action = OpenblasCoreAction::restarted;
    }
    return;
  }
  s.forced = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  if (!openblas_core_is_older(core, cpu_vector_support())) return;
  if (keep) {
    s.action = OpenblasCoreAction::kept;
    return;
  }
  s.action = OpenblasCoreAction::not_restarted;
  if (!openblas_reads_coretype()) {
    s.why_not = "a build of OpenBLAS for one CPU, which OPENBLAS_CORETYPE does not change";
    return;
  }
  const char* old_coretype = std::getenv("OPENBLAS_CORETYPE");
  const std::string previous = old_coretype ? old_coretype : "";
  setenv("OPENBLAS_CORETYPE", best, 1);
  setenv(kRestartMarker, (core + (s.forced ? kForcedSuffix : "")).c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);  // returns only on failure
  s.why_not = std::string("the restart failed: execv(/proc/self/exe): ") + std::strerror(errno);
  unsetenv(kRestartMarker);
  if (s.forced)
    setenv("OPENBLAS_CORETYPE", previous.c_str(), 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
}

OpenblasCoreStatus openblas_core_status() {
  const CpuVectorSupport cpu = cpu_vector_support();
  OpenblasCoreStatus status;
  status.core = openblas_core_name();
  status.best = best_openblas_core(cpu);
  status.cpu = cpu_vector_words(cpu);
  status.older = openblas_core_is_older(status.core, cpu);
  const StartUp& s = start_up();
  if (s.checked) {
    status.forced = s.forced;
    status.before = s.before;
    status.action = s.action;
    status.why_not = s.why_not;
  } else {  // a program that did not call restart_on_best_openblas_core
    status.forced = std::getenv("OPENBLAS_CORETYPE") != nullptr;
    if (status.older) {
      status.action = OpenblasCoreAction::not_restarted;
      status.why_not = "the program did not call restart_on_best_openblas_core at start-up";
    }
  }
  return status;
}

const char* openblas_core_action_name(OpenblasCoreAction action) {
  switch (action) {
    case OpenblasCoreAction::none: return "none";
    case OpenblasCoreAction::restarted: return "restarted";
    case OpenblasCoreAction::kept: return "kept";
    case OpenblasCoreAction::not_restarted: return "not_restarted";
  }
  return "none";
}

std::string openblas_core_report(const OpenblasCoreStatus& s) {
  const std::string on_cpu = " on a CPU with " + s.cpu;
  switch (s.action) {
    case OpenblasCoreAction::restarted:
      if (s.forced)
        return "OPENBLAS_CORETYPE=" + s.before + " asked OpenBLAS for " + named(s.before) + " kernels" + on_cpu +
               "; restarted with OPENBLAS_CORETYPE=" + s.core + " (" + kOpenblasCoretypeOptOut + "=keep keeps yours)";
      return "OpenBLAS chose " + named(s.before) + on_cpu + "; restarted with OPENBLAS_CORETYPE=" + s.core;
    case OpenblasCoreAction::kept:
      return "OpenBLAS runs " + named(s.core) + on_cpu + ", kept as " + kOpenblasCoretypeOptOut +
             "=keep asks (OPENBLAS_CORETYPE=" + s.best + " would run faster kernels)";
    case OpenblasCoreAction::not_restarted: {
      const std::string fix = !openblas_reads_coretype()
                                  ? "use an OpenBLAS built with DYNAMIC_ARCH=1 (Debian's) or for this CPU"
                              : s.before.empty() ? "start the program with OPENBLAS_CORETYPE=" + s.best
                                                 : "a newer OpenBLAS may know this CPU";
      return "OpenBLAS runs " + named(s.core) + on_cpu + (s.why_not.empty() ? "" : " (" + s.why_not + ")") +
             ": its products may run several times slower; " + fix;
    }
    case OpenblasCoreAction::none: break;
  }
  if (openblas_core_isa(s.core) == BlasIsa::unknown)
    return "OpenBLAS runs its " + s.core + " kernels, a core nnlab does not rank; left as it is";
  return "OpenBLAS runs " + named(s.core) + on_cpu + (s.forced ? ", as OPENBLAS_CORETYPE sets" : ", its own choice");
}

std::string openblas_core_report() { return openblas_core_report(openblas_core_status()); }

void warn_once_if_openblas_core_is_older() {
  static std::once_flag once;
  std::call_once(once, [] {
    const OpenblasCoreStatus status = openblas_core_status();
    if (status.action != OpenblasCoreAction::not_restarted) return;
    std::fprintf(stderr, "nnlab: warning: %s\n", openblas_core_report(status).c_str());
  });
}

}  // namespace nnlab
