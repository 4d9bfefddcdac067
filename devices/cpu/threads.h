// nnlab's own CPU thread count. OpenBLAS is the OpenMP build, so BLAS and nnlab's loops
// share one OpenMP pool of exactly this many threads and never oversubscribe the cores.
#pragma once
#include <string>

namespace nnlab {

int cpu_cores();              // cores this process may run on (its affinity mask)
void set_cpu_threads(int n);  // n <= 0 means cpu_cores()
int cpu_threads();
const char* openblas_build(); // OpenBLAS's own description of its build
std::string cpu_model_name();

}  // namespace nnlab
