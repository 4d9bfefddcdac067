// The `nnlab` command-line program.
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "apps/commands.h"
#include "apps/distributed/world.h"
#include "devices/host_cpu.h"

int main(int argc, char** argv) {
  // OpenBLAS chose its kernels while it loaded; an older core than this CPU runs is corrected by
  // starting again, so this comes before any thread, output or MPI_Init (host_cpu.h).
  try {
    nnlab::host_cpu::restart_on_best_openblas_core(argv);
  } catch (const std::exception& e) {
    return nnlab::exit_after_error(e);
  }
  spdlog::set_pattern("%v");
  CLI::App app{"nnlab: train small neural networks on the CPU or CUDA and compare the two honestly"};
  app.require_subcommand(1);
  app.set_version_flag("--version", nnlab::version_string());
  nnlab::register_commands(app);
  // A first word that is neither an option nor a subcommand: say which commands exist.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      std::cerr << "nnlab: error: unknown command '" << argv[1] << "'; choose one of: " << names << std::endl;
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Under mpirun every rank parses the same command line and fails the same way: rank 0
    // alone says so (and prints --help), the others exit with the same code.
    if (nnlab::launched_rank() != 0) return e.get_exit_code();
    return app.exit(e);
  }
  try {
    nnlab::host_cpu::kernel_isa();  // a bad NNLAB_CPU_ISA is refused here, before any work
    const int code = nnlab::run_selected_command(app);
    nnlab::end_ranks();  // under mpirun: every rank ends MPI together
    return code;
  } catch (const std::exception& e) {  // nnlab::Error and the standard library's alike
    std::fflush(stdout);
    return nnlab::exit_after_error(e);
  }
}
