// `nnlab train --report PATH`: the HTML page of the run (run_report.h), written when the run
// ends, drawn from its run records. Without --metrics those records go to a scratch file that
// is removed afterwards.
#pragma once
#include <functional>
#include <string>

#include "apps/train_config.h"

namespace nnlab {

class TrainReport {
 public:
  // Checks that `output` can be written (before any training) and, when the user gave no
  // --metrics file, points config.metrics at a scratch file. An empty output: no report.
  TrainReport(std::string output, TrainConfig& config);
  ~TrainReport();
  TrainReport(const TrainReport&) = delete;
  TrainReport& operator=(const TrainReport&) = delete;

  // Runs the training, then writes the report: also when the run stops on an error (a
  // non-finite loss is the run most worth looking at), before the error goes on.
  void around(const std::function<void()>& run);

 private:
  void write() const;

  std::string output_, records_;
  bool scratch_ = false;  // records_ is our scratch file, not the user's --metrics
};

}  // namespace nnlab
