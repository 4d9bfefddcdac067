#include "optim/optimizer.h"

#include <algorithm>

#include "autograd/ops.h"
#include "devices/registry.h"
#include "optim/schedule.h"

namespace nnlab {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const Tensor& p : params_)
    NNLAB_CHECK(p.is_leaf() && p.requires_grad(), "optimizer: parameter ", p.describe(),
                " is not a leaf that requires a gradient");
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

void Optimizer::step_checked(const std::vector<NonFiniteMark>& marks) {
  NNLAB_CHECK(marks.size() == params_.size(), "step_checked: ", marks.size(), " marks for ", params_.size(),
              " parameters");
  NNLAB_CHECK(skip_flag_.defined(), "step_checked: set a skip flag first (set_skip_flag)");
  std::vector<Tensor> grads;
  for (const Tensor& p : params_) grads.push_back(p.grad());
  raise_if_any_not_finite(grads, skip_flag_, marks);
  step();
}

void Optimizer::prepare_recording(int64_t window) {
  NNLAB_CHECK(!params_.empty(), "prepare_recording: the optimizer has no parameters");
  NNLAB_CHECK(window >= 1, "prepare_recording: a window of ", window, " steps");
  for (const Tensor& p : params_)
    NNLAB_CHECK(p.device() == params_[0].device(), "prepare_recording: parameters on ", params_[0].device().str(),
                " and ", p.device().str(), "; a recorded update runs on one device");
  const Device device = params_[0].device();
  numbers_on_device_ = Tensor::zeros({1, recorded_numbers()}, DType::Float32, device);
  window_ = window;
  numbers_table_ = Tensor::zeros({window_, recorded_numbers()}, DType::Float32, device);
  std::vector<int32_t> order(static_cast<size_t>(window_));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  table_order_ = Tensor::from_vector(order, {window_}).to(device);
  table_row_ = Tensor::full({}, -1.0, DType::Int32, device);
  window_step_ = window_steps_taken_ = -1;
  window_rows_used_ = window_;  // no window yet: the first stage uploads one
  recorded_.clear();
}

// row += 1, then numbers = table[row]: both read and written on the device, so each replay
// takes the next row. A row past the table's end gathers nothing and records a device fault,
// raised at the next read-back (stage_recorded_step uploads before that can happen).
void Optimizer::record_step() {
  NNLAB_CHECK(numbers_on_device_.defined(), "record_step: call prepare_recording before the capture");
  Backend& be = backend_for(numbers_on_device_.device());
  be.increment_counter(table_row_);
  be.gather_rows_at(numbers_table_, table_order_, table_row_, numbers_on_device_);
  record_update();
}

// The replay reads the window's next row (the device's counter counts replays), which holds
// this step's numbers while the steps since the upload were all replays, one after another.
void Optimizer::stage_recorded_step(const LrSchedule* schedule, int64_t step) {
  const bool next_row = window_rows_used_ < window_ && step == window_step_ + window_rows_used_ &&
                        steps_ == window_steps_taken_ + window_rows_used_;
  if (!next_row) upload_recorded_window(schedule, step);
  ++window_rows_used_;
  advance_recorded_step();
}

// The numbers of steps step … step + window − 1, one row each, with the lr and
// momentum the schedule gives each step (then set back to this step's); the row counter back
// to −1. Both copies are queued behind the replays already queued, which still read the old
// table, so no replay reads a row of the wrong window.
void Optimizer::upload_recorded_window(const LrSchedule* schedule, int64_t step) {
  NNLAB_CHECK(numbers_table_.defined(), "stage_recorded_step: call prepare_recording first");
  const size_t width = static_cast<size_t>(recorded_numbers());
  std::vector<float> table(static_cast<size_t>(window_) * width, 0.0f);
  // Rows past the schedule's last step stay zero: training ends before a replay reads them.
  const int64_t rows = schedule ? std::min(window_, std::max<int64_t>(0, schedule->steps_defined() - step)) : window_;
  for (int64_t j = 0; j < rows; ++j) {
    if (schedule) schedule->apply(*this, step + j);
    const std::vector<float> numbers = recorded_numbers_ahead(j);
    NNLAB_CHECK(numbers.size() <= width, "stage_recorded_step: ", numbers.size(), " numbers for rows of ", width);
    std::copy(numbers.begin(), numbers.end(), table.begin() + static_cast<std::ptrdiff_t>(j * width));
  }
  if (schedule) schedule->apply(*this, step);
  Backend& be = backend_for(numbers_table_.device());
  be.copy_from_host(numbers_table_, table.data());
  be.fill(table_row_, -1.0);
  window_step_ = step;
  window_steps_taken_ = steps_;
  window_rows_used_ = 0;
}

std::vector<size_t> Optimizer::parameters_to_record(const char* state_name, const std::vector<Tensor>& state) const {
  NNLAB_CHECK(numbers_on_device_.defined(), "record_step: call prepare_recording before the capture");
  std::vector<size_t> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    NNLAB_CHECK(state.empty() || state[i].defined(), "record_step: parameter ", i, " has no ", state_name,
                " yet; record the update after one step() (its first step makes the state)");
    out.push_back(i);
  }
  return out;
}

Tensor Optimizer::restored_state(const std::string& key, const Tensor& value, size_t& index,
                                 std::string& name) const {
  const size_t dot = key.find('.');
  size_t used = 0;
  try {
    index = std::stoul(key.substr(0, dot), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  NNLAB_CHECK(dot != std::string::npos && used == dot && index < params_.size(), "optimizer state '", key,
              "' does not belong to an optimizer of ", params_.size(), " parameters");
  name = key.substr(dot + 1);
  const Tensor& p = params_[index];
  NNLAB_CHECK(value.shape() == p.shape(), "optimizer state '", key, "' has shape ", shape_str(value.shape()),
              " but parameter ", index, " has shape ", shape_str(p.shape()));
  Tensor out = Tensor::empty(p.shape(), p.dtype(), p.device());
  out.copy_(value.dtype() == p.dtype() ? value : value.to(p.dtype()));
  return out;
}

}  // namespace nnlab
