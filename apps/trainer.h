// The training loop behind `nnlab train`: data, model, optimizer, one epoch at a time,
// progress while it runs and one result line per epoch.
#pragma once
#include <memory>

#include "apps/run_records.h"
#include "apps/train_config.h"
#include "datasets/dataloader.h"
#include "datasets/dataset.h"
#include "layers/zoo.h"
#include "optim/optimizer.h"

namespace nnlab {

struct PhaseSeconds {
  double data = 0, forward = 0, backward = 0, optimizer = 0;
};

struct EpochResult {
  int64_t epoch = 0;
  double train_loss = 0;   // mean over the epoch's steps
  double test_accuracy = 0;
  double seconds = 0;
  double images_per_second = 0;
  PhaseSeconds phases;
};

struct EvalResult {
  double accuracy = 0;
  int64_t correct = 0, total = 0;
};

Normalization channel_statistics(const Dataset& data);

class Trainer {
 public:
  explicit Trainer(TrainConfig config);
  EpochResult train_epoch(int64_t epoch);  // 1-based
  EvalResult evaluate(const Dataset& data);
  // All epochs with progress and per-epoch lines; returns the last epoch's result.
  EpochResult run();
  bool reached_max_steps() const { return config_.max_steps > 0 && global_step_ >= config_.max_steps; }

  Sequential& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Dataset& test_set() const { return test_; }
  const TrainConfig& config() const { return config_; }
  Device device() const { return device_; }

 private:
  TrainConfig config_;
  Device device_;
  Dataset train_, test_;
  std::shared_ptr<Sequential> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataLoader> loader_;
  std::unique_ptr<LrSchedule> schedule_;
  Normalization normalization_;
  RunRecorder recorder_;
  Tensor nonfinite_flag_;  // int32 scalar on the device, raised by the loss kernel
  int64_t global_step_ = 0;
};

}  // namespace nnlab
