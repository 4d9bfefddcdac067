// nnlab report: one self-contained HTML page from the run records of one or more training
// runs (`nnlab train --metrics FILE`), their curves overlaid for comparison.
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "apps/commands.h"
#include "apps/run_report.h"

namespace nnlab {

void register_report_command(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("report", "Draw one HTML page (loss and accuracy curves, time per phase, images/s, "
                                               "configuration) from the run records of one or more training runs");
  sub->add_option("runs", *files, "Run record files written by `nnlab train --metrics FILE`; several are overlaid")
      ->required();
  sub->add_option("-o,--output", *output, "The HTML file to write (self-contained: opens offline)")->required();
  add_command(sub, [files, output] {
    write_run_report(*files, *output, "-o");
    spdlog::info("wrote {} ({} run{})", *output, files->size(), files->size() == 1 ? "" : "s");
    return 0;
  });
}

}  // namespace nnlab
