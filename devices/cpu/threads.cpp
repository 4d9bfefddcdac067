#include "devices/cpu/threads.h"

#include <omp.h>
#include <sched.h>

#include <fstream>
#include <string>

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_config(void);
}

namespace nnlab {

namespace {
int g_threads = 0;
}

int cpu_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return omp_get_num_procs();
}

void set_cpu_threads(int n) {
  g_threads = n > 0 ? n : cpu_cores();
  omp_set_num_threads(g_threads);
  openblas_set_num_threads(g_threads);
}

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
