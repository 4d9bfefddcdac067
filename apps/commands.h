// The subcommands of `nnlab`. Each registers its options and a function that runs it.
#pragma once
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace nnlab {

std::string version_string();
void register_commands(CLI::App& app);
// Runs the subcommand that was parsed; returns the process exit code.
int run_selected_command(CLI::App& app);

// Used by register_commands: a subcommand and what to run when it was chosen.
void add_command(CLI::App* sub, std::function<int()> run);

void register_train_command(CLI::App& app);
void register_info_commands(CLI::App& app);  // devices, sgemm, models
void register_sgemm_command(CLI::App& app);  // cmd_sgemm.cpp, called by register_info_commands
void register_predict_command(CLI::App& app);  // cmd_predict.cpp
void register_eval_command(CLI::App& app);     // cmd_eval.cpp
void register_explain_command(CLI::App& app);  // cmd_explain.cpp
void register_compare_command(CLI::App& app);  // cmd_compare.cpp
void register_sweep_command(CLI::App& app);    // cmd_sweep.cpp
void register_report_command(CLI::App& app);   // cmd_report.cpp
void register_data_command(CLI::App& app);     // cmd_data.cpp

}  // namespace nnlab
