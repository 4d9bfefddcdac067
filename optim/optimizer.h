// Optimizer: holds the parameters (shared handles, so updates land in the model) and their
// per-parameter state, and applies one fused device kernel per parameter per step.
// Modelled on the PyTorch C++ frontend (torch/optim/optimizer.h, sgd.h, adam.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/nonfinite.h"
#include "core/tensor.h"

namespace nnlab {

class LrSchedule;

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // step(), with every gradient first checked for a NaN or ±inf (the skip flag must be set):
  // the first, in params() order, that holds one raises the flag with its mark (marks: one per
  // parameter), and no parameter is updated. The default checks, then steps; SGD checks inside
  // its fused step (Backend::sgd_step_all), so each gradient is read once.
  virtual void step_checked(const std::vector<NonFiniteMark>& marks);
  virtual std::string describe() const = 0;
  // Drops the gradients (PyTorch's zero_grad(set_to_none=True)): parameters that get no
  // gradient in the next backward are not updated.
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  // The momentum-like coefficient that one-cycle schedules cycle (SGD momentum, Adam β1).
  virtual double momentum() const { return 0.0; }
  virtual void set_momentum(double) {}
  int64_t steps_taken() const { return steps_; }

  // When set (a non-finite flag, core/nonfinite.h, on the parameters' device), steps are
  // skipped on the device while the flag is raised: a non-finite loss or gradient never
  // reaches the weights.
  void set_skip_flag(Tensor flag) { skip_flag_ = std::move(flag); }

  // Per-parameter state for checkpoints: "<index>.<name>" -> tensor, e.g. "0.momentum_buffer".
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  // Restores state() from a checkpoint (copied to each parameter's device); throws an Error
  // naming the entry when an index, name or shape does not fit these parameters.
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& state) = 0;
  void set_steps_taken(int64_t steps) { steps_ = steps; }

  const std::vector<Tensor>& params() const { return params_; }

  // ---- the update recorded in a CUDA graph (apps/step_graph.h) ---------------------------
  // The numbers that change from step to step (the learning rate, momentum or β1, Adam's bias
  // corrections) are kernel arguments in step(), which a graph would freeze. Recorded, the
  // update reads them from a small buffer on the device instead, and the host writes them a
  // window of kRecordedWindow steps at a time, as a table on the device: each replay first
  // advances a row counter and copies that row into the buffer (two small kernels inside the
  // graph), so the host uploads once a window, not once a step.
  //   prepare_recording(w)     makes the buffer, a table of w rows and the counter; call it
  //                            before the capture (memory made inside one belongs to the graph);
  //   record_step()            inside the capture: the row's copy, then the update of the
  //                            parameters that have a gradient now (they must have taken one
  //                            step already: their state exists), reading the buffer;
  //   stage_recorded_step(schedule, step)
  //                            before each replay of optimizer step `step` (0-based, as the
  //                            schedule counts): that step's host bookkeeping and, at a window's
  //                            start, the window's numbers from `schedule` (null: the lr as
  //                            set), one upload. A step taken outside the graph in between (the
  //                            short last batch) moves the step counts, so the next replay
  //                            starts a new window. The replay updates exactly as step() would.
  static constexpr int64_t kRecordedWindow = 256;
  void prepare_recording(int64_t window = kRecordedWindow);
  void record_step();
  void stage_recorded_step(const LrSchedule* schedule, int64_t step);

 protected:
  // How many float32 numbers the recorded update reads on the device.
  virtual int64_t recorded_numbers() const = 0;
  // record_step's update, reading numbers_on_device_ (SgdParams/AdamParams::on_device).
  virtual void record_update() = 0;
  // The numbers of the recorded step `ahead` steps after the next one, with the lr and momentum
  // as they are set now, rounded to float as step() rounds its kernel arguments.
  virtual std::vector<float> recorded_numbers_ahead(int64_t ahead) const = 0;
  // One recorded step's host bookkeeping: the step counts step() would advance.
  virtual void advance_recorded_step() { ++steps_; }
  // record_step's slots: the indices of the parameters with a gradient, each with its state.
  std::vector<size_t> parameters_to_record(const char* state_name, const std::vector<Tensor>& state) const;

  Tensor numbers_on_device_;     // float32 (1, recorded_numbers()): the replayed step's row
  std::vector<size_t> recorded_;  // the parameters record_step updates, in order

 private:
  void upload_recorded_window(const LrSchedule* schedule, int64_t step);
  Tensor numbers_table_;     // float32 (window_, recorded_numbers()): a window's rows
  Tensor table_order_;       // int32 0, 1, …: gather_rows_at's order, row i = entry i
  Tensor table_row_;         // int32: the row the last replay read (−1 after an upload)
  int64_t window_step_ = -1;         // the optimizer step of the window's row 0
  int64_t window_steps_taken_ = -1;  // steps_ when the window was uploaded
  int64_t window_ = kRecordedWindow;            // rows in the table
  int64_t window_rows_used_ = kRecordedWindow;  // replays staged since

 protected:
  // For load_state: splits "<index>.<name>", checks the index and that `value` has the
  // parameter's shape, and returns a copy of it on the parameter's device and dtype.
  Tensor restored_state(const std::string& key, const Tensor& value, size_t& index, std::string& name) const;

  std::vector<Tensor> params_;
  double lr_ = 0.0;
  int64_t steps_ = 0;
  Tensor skip_flag_;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SgdOptions options);
  void step() override;
  void step_checked(const std::vector<NonFiniteMark>& marks) override;
  std::string describe() const override;
  double momentum() const override { return options_.momentum; }
  void set_momentum(double m) override { options_.momentum = m; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 protected:
  int64_t recorded_numbers() const override { return 2; }  // {lr, momentum}
  void record_update() override;
  std::vector<float> recorded_numbers_ahead(int64_t ahead) const override;

 private:
  void step_all(const std::vector<NonFiniteMark>* marks);  // marks: check the gradients first

  SgdOptions options_;
  std::vector<Tensor> momentum_buffers_;  // created at a parameter's first step
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// Adam (L2 penalty added to the gradient) and, with decoupled = true, AdamW.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay = false);
  void step() override;
  std::string describe() const override;
  double momentum() const override { return options_.beta1; }
  void set_momentum(double b1) override { options_.beta1 = b1; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;
  // Steps taken by each parameter (its bias correction), saved with checkpoints.
  const std::vector<int64_t>& param_steps() const { return param_steps_; }
  void set_param_steps(std::vector<int64_t> steps);

 protected:
  // {1 − lr·wd, β1, 1 − β1, then two per parameter: lr/(1 − β1ᵗ), √(1 − β2ᵗ)}
  int64_t recorded_numbers() const override { return 3 + 2 * static_cast<int64_t>(params_.size()); }
  void record_update() override;
  std::vector<float> recorded_numbers_ahead(int64_t ahead) const override;
  void advance_recorded_step() override;  // and each recorded parameter's step

 private:
  AdamOptions options_;
  bool decoupled_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> param_steps_;  // PyTorch counts steps per parameter
};

// AdamW: Adam with decoupled weight decay (PyTorch's default weight_decay = 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}
};

}  // namespace nnlab
