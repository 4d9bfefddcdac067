#include "devices/cpu/threads.h"

#include <omp.h>
#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "devices/cpu/openblas_core.h"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_config(void);
}

namespace nnlab {

namespace {
int g_threads = 0;
// The largest pool, and the mode, the floating-point setting was last applied to. OpenMP keeps
// its pool threads when a team gets smaller, so a smaller count needs no new pass: the thread
// governor switches between 1 and all threads, and on a busy machine every parallel region it
// avoided costs a scheduler time slice.
int g_applied_threads = 0;
Denormals g_applied_mode = Denormals::flush;
Denormals g_denormals = Denormals::flush;

// Sets the calling thread's floating-point control register.
void apply_denormals_here(Denormals mode) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;  // MXCSR bits 15 and 6
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(mode == Denormals::flush ? csr | kFlushToZero | kDenormalsAreZero
                                      : csr & ~(kFlushToZero | kDenormalsAreZero));
#elif defined(__aarch64__)
  constexpr unsigned long kFlushToZero = 1UL << 24;  // FPCR.FZ
  unsigned long fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  fpcr = mode == Denormals::flush ? fpcr | kFlushToZero : fpcr & ~kFlushToZero;
  __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#else
  (void)mode;  // other CPUs: their default (gradual underflow) stays
#endif
}

// The calling thread and each thread of an OpenMP pool of `threads` threads.
void apply_denormals_everywhere(Denormals mode, int threads) {
  apply_denormals_here(mode);
#pragma omp parallel num_threads(threads)
  apply_denormals_here(mode);
}
}  // namespace

int cgroup_cpu_limit(const std::string& cpu_max_file) {
  std::ifstream in(cpu_max_file);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  long long q = 0;
  try {
    q = std::stoll(quota);
  } catch (const std::exception&) {
    return 0;
  }
  if (q <= 0) return 0;
  return static_cast<int>(std::max(1LL, (q + period - 1) / period));  // a part of a core is a core to run on
}

// The CPUs the process may run on (its affinity mask: taskset, cpusets), but no more than its
// cgroup's CPU quota allows (a container started with --cpus=2 on a 16-core host sees 16 CPUs
// in its mask and may use two of them: 16 threads there would take turns, not run at once).
int cpu_cores() {
  cpu_set_t set;
  const int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : omp_get_num_procs();
  const int quota = cgroup_cpu_limit("/sys/fs/cgroup/cpu.max");
  return quota > 0 ? std::min(n, quota) : n;
}

int physical_cores_of(const std::vector<int>& cpus, const std::string& sysfs_cpu_dir) {
  std::set<std::pair<long long, long long>> cores;  // (package, core id)
  long long unknown = -1;                           // a CPU without topology: a core of its own
  for (int cpu : cpus) {
    const std::string topology = sysfs_cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
    long long package = 0, core = 0;
    std::ifstream p(topology + "physical_package_id"), c(topology + "core_id");
    if (p >> package && c >> core)
      cores.emplace(package, core);
    else
      cores.emplace(unknown--, 0);
  }
  return static_cast<int>(cores.size());
}

int cpu_physical_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpu_cores();
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return std::min(cpu_cores(), physical_cores_of(cpus, "/sys/devices/system/cpu"));
}

int max_cpu_threads() { return std::max(1024, 2 * cpu_cores()); }

void set_cpu_threads(int n) {
  NNLAB_CHECK(n <= max_cpu_threads(), "--threads ", n, " is more than nnlab runs (at most ", max_cpu_threads(),
              "; this machine has ", cpu_cores(), " cores, and 0 means all of them)");
  // The first time nnlab sets up OpenBLAS is the last moment to say its kernels are too old.
  warn_once_if_openblas_core_is_older();
  g_threads = n > 0 ? n : cpu_cores();
  omp_set_num_threads(g_threads);
  openblas_set_num_threads(g_threads);
  if (g_threads > g_applied_threads || g_denormals != g_applied_mode) {
    g_applied_threads = std::max(g_applied_threads, g_threads);
    apply_denormals_everywhere(g_denormals, g_applied_threads);
    g_applied_mode = g_denormals;
  }
}

void set_cpu_denormals(Denormals mode) {
  g_denormals = mode;
  set_cpu_threads(g_threads);  // applies it; 0 (not set yet) means the default pool size
}

Denormals cpu_denormals() { return g_denormals; }

const char* denormals_name(Denormals mode) { return mode == Denormals::flush ? "flush" : "keep"; }

int cpu_threads() {
  if (g_threads == 0) set_cpu_threads(0);
  return g_threads;
}

const char* openblas_build() { return openblas_get_config(); }

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

}  // namespace nnlab
