// Shared by the data-parallel tests (test_distributed*.cpp): start `nnlab train` under mpirun
// and compare what runs with different numbers of ranks wrote.
#pragma once
#ifdef NNLAB_WITH_MPI
#include <cmath>
#include <string>

#include "cli_support.h"
#include "core/serialization.h"

namespace nnlab_test {

// The mpirun prefix for `ranks` processes. CI runs as root, which Open MPI refuses unless told;
// --oversubscribe: more ranks than cores is fine for a test; --bind-to none and yielding
// while idle: the ranks share two busy cores with the rest of the build, and a rank spinning
// in MPI would starve the one it waits for; no single-copy shared memory (CMA), which
// containers often forbid.
inline std::string mpirun_prefix() {
  return std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") + NNLAB_MPIEXEC +
         " --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none ";
}

// `nnlab train ARGS` on `ranks` ranks (one thread each), stdout and stderr together.
inline CliResult mpi_train(int ranks, const std::string& args) {
  return run_shell(mpirun_prefix() + "-np " + std::to_string(ranks) + " " + NNLAB_CLI_PATH + " train --threads 1 " +
                   args);
}

// ‖a − b‖₂ / ‖b‖₂ over every float32 tensor of two checkpoints (weights and optimizer state).
inline double relative_l2(const std::string& a_path, const std::string& b_path) {
  const nnlab::SafetensorsFile a = nnlab::load_safetensors(a_path), b = nnlab::load_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double diff = 0, norm = 0;
  for (const auto& [name, t] : a.tensors) {
    if (t.dtype() != nnlab::DType::Float32) continue;
    const nnlab::Tensor& u = b.at(name);
    REQUIRE(u.numel() == t.numel());
    const float* x = t.data<float>();
    const float* y = u.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      norm += double(y[i]) * y[i];
    }
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

inline double relative_difference(double a, double b) { return std::abs(a - b) / std::abs(b); }

}  // namespace nnlab_test
#endif
