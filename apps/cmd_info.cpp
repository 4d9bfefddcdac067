// nnlab devices / nnlab models: what this machine offers and what the zoo holds.
#include <cstdio>

#include "apps/commands.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "layers/zoo.h"
#ifdef NNLAB_WITH_CUDA
#include "devices/cuda/cuda_backend.h"
#endif

#ifndef NNLAB_VERSION
#define NNLAB_VERSION "0.1.0"
#endif

namespace nnlab {

std::string version_string() { return std::string("nnlab ") + NNLAB_VERSION; }

void register_info_commands(CLI::App& app) {
  auto threads = std::make_shared<int>(0);
  CLI::App* devices = app.add_subcommand("devices", "List the CPU and the GPUs nnlab can use");
  devices->add_option("--threads", *threads, "CPU threads (default: all cores)");
  add_command(devices, [threads] {
    set_cpu_threads(*threads);
    std::printf("cpu: %s, %d cores, %d threads\n  OpenBLAS: %s\n", cpu_model_name().c_str(), cpu_cores(),
                cpu_threads(), openblas_build());
#ifdef NNLAB_WITH_CUDA
    std::printf("%s\n", cuda_device_report().c_str());
#else
    std::printf("cuda: not usable: %s\n", cuda_status().reason.c_str());
#endif
    return 0;
  });

  CLI::App* models = app.add_subcommand("models", "List the models of the zoo and their default recipes");
  add_command(models, [] {
    for (const ModelInfo& m : model_zoo())
      std::printf("%-10s %s\n           recipe: %s lr %g%s, batch %lld, data %s\n", m.name.c_str(), m.summary.c_str(),
                  m.recipe.optimizer.c_str(), m.recipe.lr,
                  m.recipe.momentum > 0 ? (" momentum " + std::to_string(m.recipe.momentum).substr(0, 4)).c_str() : "",
                  static_cast<long long>(m.recipe.batch), m.recipe.data.c_str());
    return 0;
  });
}

}  // namespace nnlab
