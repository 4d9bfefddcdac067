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
  // update reads them from a small buffer on the device instead:
  //   prepare_recording()    makes the buffer; call it before the capture (memory made inside
  //                          one belongs to the graph);
  //   record_step()          inside the capture: queues the update of the parameters that
  //                          have a gradient now (they must have taken one step already: their
  //                          state exists), reading the buffer;
  //   stage_recorded_step()  before each replay: one step's host bookkeeping for those
  //                          parameters, and that step's numbers written into the buffer (one
  //                          upload), so the replay updates exactly as step() would.
  void prepare_recording();
  virtual void record_step() = 0;
  virtual void stage_recorded_step() = 0;

 protected:
  // How many float32 numbers the recorded update reads on the device.
  virtual int64_t recorded_numbers() const = 0;
  // record_step's slots: the indices of the parameters with a gradient, each with its state.
  std::vector<size_t> parameters_to_record(const char* state_name, const std::vector<Tensor>& state) const;
  // Writes `numbers` into the buffer on the device (after a check of their count).
  void upload_recorded_numbers(const std::vector<float>& numbers);

  Tensor numbers_on_device_;     // float32 (recorded_numbers())
  std::vector<size_t> recorded_;  // the parameters record_step updates, in order
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
  void record_step() override;
  void stage_recorded_step() override;
  double momentum() const override { return options_.momentum; }
  void set_momentum(double m) override { options_.momentum = m; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 protected:
  int64_t recorded_numbers() const override { return 2; }  // {lr, momentum}

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
  void record_step() override;
  void stage_recorded_step() override;
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
