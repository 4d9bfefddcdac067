// Reading back the run records that `nnlab train --metrics FILE` writes (run_records.h): one
// JSON object per line, a "run" record first (model, data, device, the environment and the
// full configuration), then "step" records (with --metrics-every) and one "epoch" record per
// finished epoch. `nnlab report` and `train --report` draw their pages from what is read here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nnlab {

struct EpochRecord {
  int64_t epoch = 0, steps = 0;
  double train_loss = 0, test_accuracy = 0, seconds = 0, images_per_second = 0;
  double data = 0, forward = 0, backward = 0, optimizer = 0;  // phase seconds
};

struct StepRecord {
  int64_t epoch = 0, step = 0;  // step counts from 1 over the whole run
  double loss = 0;              // NaN when the run recorded a non-finite loss (null)
};

struct RunLog {
  std::string path;
  std::string name;         // the run's label in legends and tables (the file name without .jsonl)
  nlohmann::json run;       // the "run" record, as written
  std::vector<EpochRecord> epochs;
  std::vector<StepRecord> steps;
  bool dropped_partial_line = false;  // the last line was cut off (a crash while writing it)
};

// Reads and checks one run record file. Throws an Error naming the file (and the line) when
// it is missing, unreadable, empty, not JSON Lines, not the records of `nnlab train`, or holds
// no epoch or step to draw. A last line cut off mid-write is left out (dropped_partial_line).
RunLog read_run_log(const std::string& path);

// Gives every run a distinct name: the file name without its extension, or the path as given
// where two runs share a file name.
void name_runs(std::vector<RunLog>& runs);

}  // namespace nnlab
