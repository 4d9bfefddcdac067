// The training loop behind `nnlab train`: data, model, optimizer, one epoch at a time,
// progress while it runs and one result line per epoch.
#pragma once
#include <functional>
#include <memory>

#include "apps/batch_slices.h"
#include "apps/distributed/data_parallel.h"
#include "apps/nonfinite_guard.h"
#include "apps/phase_events.h"
#include "apps/run_records.h"
#include "apps/step_graph.h"
#include "apps/thread_governor.h"
#include "apps/train_config.h"
#include "datasets/dataloader.h"
#include "datasets/dataset.h"
#include "layers/check_numerics.h"
#include "layers/zoo.h"
#include "optim/optimizer.h"

namespace nnlab {

struct EpochResult {
  int64_t epoch = 0;
  double train_loss = 0;   // mean over the epoch's steps
  double test_accuracy = 0;
  double val_accuracy = -1;  // -1 without --val-split
  int64_t steps_done = 0;    // steps of this epoch taken so far (a resumed epoch counts its earlier ones)
  double loss_sum = 0;       // their summed losses
  bool interrupted = false;  // stopped by SIGINT/SIGTERM after a finished step
  double seconds = 0;
  double images_per_second = 0;
  PhaseSeconds phases;
  // Per step of the epoch, where the device counts them (the CUDA simulator): work items handed
  // to the device and waits of the host for it (Backend::device_counts); -1 elsewhere.
  double submissions_per_step = -1, host_waits_per_step = -1;
  // With NCCL, the device time of the epoch's gradient sums on the communicator's stream (CUDA
  // events): more than phases.allreduce when overlap mode hid part of it behind backward. -1
  // without NCCL.
  double allreduce_device_seconds = -1;
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
  // The signal (SIGINT or SIGTERM) that stopped run(), or 0.
  int interrupted_signal() const { return interrupted_signal_; }
  // Saves the whole training state (checkpoint.h) after `steps_done` steps of `epoch`.
  void save_checkpoint(const std::string& path, int64_t epoch, int64_t steps_done, double loss_sum) const;
  bool reached_max_steps() const { return config_.max_steps > 0 && global_step_ >= config_.max_steps; }

  // compare: keep every step's loss on the device (one 4-byte device copy per step, no wait)
  // and read them back once per epoch, into step_losses().
  void keep_step_losses() { keep_step_losses_ = true; }
  const std::vector<double>& step_losses() const { return step_losses_; }
  const std::vector<EpochResult>& epoch_results() const { return epoch_results_; }  // run()'s, in order

  Sequential& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Dataset& test_set() const { return test_; }
  const TrainConfig& config() const { return config_; }
  Device device() const { return device_; }

 private:
  void wait_for_go(int64_t epoch);  // --pace-stdin
  void prepare_checkpoint_dir() const;
  void resume_from(const std::string& path);
  void save_epoch_checkpoints(const EpochResult& r);
  // One training step: forward, loss, backward, gradient check, optimizer.
  // end_of marks each phase's end on the device's clock (PhaseEvents), where there is one.
  Tensor train_step(const Batch& batch, PhaseSeconds& phases, const std::function<void(StepPhase, bool)>& end_of);
  // Its forward and backward through the CUDA graph; an empty tensor when the step must run
  // eagerly instead (another shape, the first steps, or, with auto, a capture that failed).
  Tensor graphed_forward_backward(const Batch& batch, int64_t this_step);
  // The step as the graph records it (no host argument that changes): forward and backward,
  // and with update_in_graph_ the finiteness check and the optimizer's update.
  Tensor forward_backward_for_graph(const Tensor& images, const Tensor& labels);
  // Before each replay: the schedule's values and the optimizer's numbers for this step, and
  // the step's number on the device when an eager step came in between.
  void stage_graphed_step(int64_t this_step);
  // On CUDA, before the first epoch's clock: forward and backward once on a batch of zeros,
  // so the run's one-off work (libraries' start-up, cuDNN's timed algorithm search) is not
  // counted as training time. Changes no weight and no statistic. Logs and returns its seconds.
  double warm_up();
  // Hands the step's wall time to the governor and applies the thread count it advises.
  void adapt_threads(double step_seconds);
  // Reads the non-finite flag back and, when it is raised, stops the run with one message
  // naming the first bad step and what went bad, then `consequence`.
  void stop_if_faulty(const std::string& consequence) const;
  // SIGINT/SIGTERM seen (by any rank, in a distributed run: all stop after the same step).
  bool stop_requested() const;

  TrainConfig config_;
  Device device_;
  Dataset train_, test_, val_;  // val_ is empty without --val-split
  std::shared_ptr<Sequential> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataLoader> loader_;
  std::unique_ptr<LrSchedule> schedule_;
  Normalization normalization_;
  RunRecorder recorder_;
  std::unique_ptr<NonFiniteGuard> guard_;    // the non-finite flag, read once per log interval
  std::unique_ptr<NumericsCheck> numerics_;  // --check-numerics: layer by layer, synchronising
  // On the CPU without --threads: 1 thread or all, whichever steps faster now (thread_governor.h).
  std::unique_ptr<ThreadGovernor> governor_;
  int config_max_threads_ = 0;  // the governor's upper count
  std::unique_ptr<DataParallel> parallel_;   // only when mpirun started several ranks
  std::unique_ptr<BatchSlices> slices_;      // --batch-slices above 1
  // --cuda-graphs: the step's forward and backward as one CUDA graph (null: eager steps only).
  std::unique_ptr<GraphedStep> graphed_;
  CudaGraphs graphs_mode_ = CudaGraphs::Auto;
  int64_t eager_full_steps_ = 0;     // full-batch steps run eagerly (the first chooses cuDNN's algorithms)
  std::vector<Tensor> graph_grads_;  // the gradients the graph writes, in params() order
  // The check and the optimizer's update are in the graph too (not with --clip-grad-norm,
  // whose norm the host reads). step_number_: int32 on the device, the replayed step's number
  // (the graph adds one at its start), for the non-finite mark; in step with global_step_
  // while step_number_current_.
  bool update_in_graph_ = false;
  Tensor step_number_;
  bool step_number_current_ = false;
  bool last_step_in_graph_ = false;  // the last step's check, update and loss sum ran in the graph
  Tensor loss_sum_;                  // the epoch's summed step losses, on the device
  std::function<void()> pending_gather_;  // the batch's deferred gather, for the capture's body
  double warm_up_seconds_ = 0;       // warm_up()'s time, reported with the first epoch
  bool keep_step_losses_ = false;
  std::vector<double> step_losses_;
  std::vector<EpochResult> epoch_results_;
  int64_t global_step_ = 0;
  // Where a resumed run picks up: this epoch, after this many of its steps, with this loss sum.
  int64_t start_epoch_ = 1, start_step_ = 0;
  double start_loss_sum_ = 0;
  double best_val_accuracy_ = -1;
  int interrupted_signal_ = 0;
};

}  // namespace nnlab
