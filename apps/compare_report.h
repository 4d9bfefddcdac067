// What `nnlab compare` measured, and its three views: the side-by-side table on stdout, the
// JSON records (--metrics), and the self-contained HTML report (--report).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/train_config.h"
#include "apps/trainer.h"

namespace nnlab {

struct VariantRun {
  std::string label, device, conv, gemm, reduce, math, precision;
  int threads = 0;
  int64_t epochs = 0, images = 0;
  PhaseSeconds phases;  // summed over all steps
  double seconds = 0, images_per_second = 0, test_accuracy = 0;
  std::vector<double> step_loss;                         // loss of every step, in order
  std::vector<std::pair<std::string, Tensor>> weights;  // final parameters, on the host
};

// How far variant b drifted from the baseline a.
struct Drift {
  std::vector<double> loss_diff;  // |loss_a − loss_b| per step
  double max_loss_diff = 0;
  int64_t max_loss_step = 0;
  std::vector<std::pair<std::string, double>> weight_rel_l2;  // ||Wa − Wb|| / ||Wa|| per tensor
};

struct CompareResult {
  TrainConfig config;
  std::vector<VariantRun> runs;  // runs[0] is the baseline
  std::vector<Drift> drift;      // drift[i] is runs[i + 1] against runs[0]
};

void print_compare(const CompareResult& r);
void write_compare_records(const CompareResult& r, const nlohmann::json& environment, const std::string& path);
std::string compare_report_html(const CompareResult& r);

}  // namespace nnlab
