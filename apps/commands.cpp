#include "apps/commands.h"

#include <utility>
#include <vector>

namespace nnlab {

namespace {
std::vector<std::pair<CLI::App*, std::function<int()>>>& command_table() {
  static std::vector<std::pair<CLI::App*, std::function<int()>>> table;
  return table;
}
}  // namespace

void add_command(CLI::App* sub, std::function<int()> run) { command_table().emplace_back(sub, std::move(run)); }

void register_commands(CLI::App& app) {
  register_train_command(app);
  register_info_commands(app);
  register_predict_command(app);
  register_eval_command(app);
  register_explain_command(app);
  register_compare_command(app);
  register_sweep_command(app);
  register_report_command(app);
  register_data_command(app);
}

int run_selected_command(CLI::App& app) {
  for (auto& [sub, run] : command_table())
    if (sub->parsed()) return run();
  (void)app;
  return 2;
}

}  // namespace nnlab
