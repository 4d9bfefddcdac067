// nnlab devices / nnlab models: what this machine offers and what the zoo holds (and nnlab
// sgemm, registered between them: cmd_sgemm.cpp).
#include <cstdio>
#include <vector>

#include "apps/commands.h"
#include "apps/train_config.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"
#include "layers/zoo.h"

#ifndef NNLAB_VERSION
#define NNLAB_VERSION "0.1.0"
#endif

namespace nnlab {

namespace {

// A checked model file: what it is built for, its recipe, and every parameter under the name
// PyTorch's twin gives it (scripts/torch_model.py).
void print_model_file(const ModelFile& m) {
  InputSpec input;
  NNLAB_CHECK(fixed_input(m.recipe.data, input), m.origin, ": its recipe's data set '", m.recipe.data,
              "' has no fixed image size; check it with nnlab train --data folder --data-dir DIR --max-steps 1");
  const auto model = build_model(m, input);
  std::printf("%s: model %s%s%s\n  for %s: %lldx%lldx%lld images, %lld classes\n  recipe: %s lr %g, momentum %g, "
              "batch %lld, schedule %s\n",
              m.origin.c_str(), m.name.c_str(), m.summary.empty() ? "" : " - ", m.summary.c_str(),
              m.recipe.data.c_str(), (long long)input.channels, (long long)input.height, (long long)input.width,
              (long long)input.classes, m.recipe.optimizer.c_str(), m.recipe.lr, m.recipe.momentum,
              (long long)m.recipe.batch, m.recipe.schedule.c_str());
  for (const auto& [name, t] : model->named_parameters())
    std::printf("  %-36s %-18s %lld\n", name.c_str(), shape_str(t.shape()).c_str(), (long long)t.numel());
  std::printf("  %lld parameters\n", (long long)model->parameter_count());
}

}  // namespace

std::string version_string() { return std::string("nnlab ") + NNLAB_VERSION; }

void register_info_commands(CLI::App& app) {
  auto threads = std::make_shared<int>(0);
  CLI::App* devices = app.add_subcommand("devices", "List the CPU and the GPUs nnlab can use");
  devices->add_option("--threads", *threads, "CPU threads (default: all cores)");
  add_command(devices, [threads] {
    host_cpu::set_threads(*threads);
    const int physical = host_cpu::physical_cores();
    const std::string smt = physical < host_cpu::cores() ? " (" + std::to_string(physical) + " physical)" : "";
    std::printf("cpu: %s, %d cores%s, %d threads\n  OpenBLAS: %s\n", host_cpu::model_name().c_str(), host_cpu::cores(),
                smt.c_str(), host_cpu::threads(), host_cpu::openblas_build());
    std::printf("  cpu kernels: %s; this CPU %s AVX-512 (set NNLAB_CPU_ISA=avx2|avx512|auto to choose)\n",
                host_cpu::kernel_isa_report().c_str(), host_cpu::has_avx512() ? "has" : "lacks");
    if (host_cpu::bf16_available())
      std::printf("  bf16 products: available (AVX-512 BF16; train --math bf16)\n");
    else
      std::printf("  bf16 products: not available: %s\n", host_cpu::bf16_unavailable_reason().c_str());
    // Two threads hand data and barriers over through this trip; a cloud machine can move its
    // virtual CPUs between placements where it differs 4× (host_cpu.h).
    if (const std::optional<double> trip = host_cpu::core_round_trip_ns())
      std::printf("  between its first two CPUs a cache line's round trip takes %.0f ns\n", *trip);
    else if (host_cpu::cores() >= 2)
      std::printf("  between its first two CPUs a cache line's round trip: not measurable now (a CPU kept busy)\n");
    // Which kernels OpenBLAS runs, what this CPU could run, and what nnlab did about it: an old
    // core costs 5x on every product (host_cpu.h).
    std::printf("  %s\n", host_cpu::openblas_core_report().c_str());
    std::printf("%s\n", cuda_report().c_str());
    return 0;
  });

  register_sgemm_command(app);  // cmd_sgemm.cpp

  CLI::App* models = app.add_subcommand("models", "List the models of the zoo and their default recipes; print or check "
                                                  "a model file");
  auto show = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  models->add_option("--show", *show,
                     "Print a zoo model's file, the start for your own: nnlab models --show cnn > mine.json");
  models->add_option("--model-file", *file,
                     "Check your own model file for its recipe's data set and list its parameters (PyTorch's names)");
  add_command(models, [show, file] {
    if (!show->empty()) {
      std::fputs(model_info(*show).text.c_str(), stdout);
      return 0;
    }
    if (!file->empty()) {
      print_model_file(read_model_file(*file));
      return 0;
    }
    for (const ModelFile& m : model_zoo())
      std::printf("%-10s %s\n           recipe: %s lr %g%s, batch %lld, data %s\n", m.name.c_str(), m.summary.c_str(),
                  m.recipe.optimizer.c_str(), m.recipe.lr,
                  m.recipe.momentum > 0 ? (" momentum " + std::to_string(m.recipe.momentum).substr(0, 4)).c_str() : "",
                  static_cast<long long>(m.recipe.batch), m.recipe.data.c_str());
    std::printf("(model files in %s; `nnlab models --show NAME` prints one)\n", zoo_directory().c_str());
    return 0;
  });
}

}  // namespace nnlab
