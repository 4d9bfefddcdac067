#include "optim/optimizer.h"

#include <algorithm>

#include "autograd/ops.h"
#include "devices/registry.h"

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

void Optimizer::prepare_recording() {
  NNLAB_CHECK(!params_.empty(), "prepare_recording: the optimizer has no parameters");
  for (const Tensor& p : params_)
    NNLAB_CHECK(p.device() == params_[0].device(), "prepare_recording: parameters on ", params_[0].device().str(),
                " and ", p.device().str(), "; a recorded update runs on one device");
  numbers_on_device_ = Tensor::zeros({recorded_numbers()}, DType::Float32, params_[0].device());
  recorded_.clear();
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

void Optimizer::upload_recorded_numbers(const std::vector<float>& numbers) {
  NNLAB_CHECK(numbers_on_device_.defined() && static_cast<int64_t>(numbers.size()) <= numbers_on_device_.numel(),
              "stage_recorded_step: ", numbers.size(), " numbers for a buffer of ",
              numbers_on_device_.defined() ? numbers_on_device_.numel() : 0, " (call prepare_recording first)");
  std::vector<float> all(static_cast<size_t>(numbers_on_device_.numel()), 0.0f);
  std::copy(numbers.begin(), numbers.end(), all.begin());
  backend_for(numbers_on_device_.device()).copy_from_host(numbers_on_device_, all.data());
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
