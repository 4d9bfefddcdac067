// SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD.
#include <sstream>

#include "devices/registry.h"
#include "optim/optimizer.h"

namespace nnlab {

SGD::SGD(std::vector<Tensor> params, SgdOptions options) : Optimizer(std::move(params)), options_(options) {
  NNLAB_CHECK(options.lr >= 0 && options.momentum >= 0 && options.weight_decay >= 0,
              "SGD: lr, momentum and weight decay must be non-negative");
  NNLAB_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
              "SGD: Nesterov momentum needs momentum > 0 and dampening = 0");
  lr_ = options.lr;
  momentum_buffers_.resize(params_.size());
}

void SGD::step() { step_all(nullptr); }

void SGD::step_checked(const std::vector<NonFiniteMark>& marks) {
  NNLAB_CHECK(marks.size() == params_.size(), "step_checked: ", marks.size(), " marks for ", params_.size(),
              " parameters");
  NNLAB_CHECK(skip_flag_.defined(), "step_checked: set a skip flag first (set_skip_flag)");
  // Parameters on several devices are stepped device by device: all gradients must be checked
  // before the first device's update, so that case takes the separate check.
  for (const Tensor& p : params_)
    if (p.device() != params_[0].device()) return Optimizer::step_checked(marks);
  step_all(&marks);
}

void SGD::step_all(const std::vector<NonFiniteMark>* marks) {
  const SgdParams hp{lr_, options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov};
  // One call per device for all its parameters (in one pass where the device can).
  std::vector<Tensor> grads(params_.size());
  std::vector<SgdSlot> slots;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    grads[i] = p.grad();
    if (!grads[i].defined()) continue;
    Tensor& buf = momentum_buffers_[i];
    const bool first = options_.momentum != 0.0 && !buf.defined();
    if (first) buf = Tensor::zeros(p.shape(), p.dtype(), p.device());
    if (!slots.empty() && slots[0].param->device() != p.device()) {
      backend_for(slots[0].param->device()).sgd_step_all(slots, hp, &skip_flag_);
      slots.clear();
    }
    slots.push_back(SgdSlot{&p, &grads[i], &buf, first, marks != nullptr, marks ? (*marks)[i] : NonFiniteMark{}});
  }
  if (!slots.empty()) backend_for(slots[0].param->device()).sgd_step_all(slots, hp, &skip_flag_);
  ++steps_;
}

void SGD::record_update() {
  recorded_ = parameters_to_record("momentum buffer", options_.momentum != 0.0 ? momentum_buffers_ : std::vector<Tensor>{});
  SgdParams hp{lr_, options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov};
  hp.on_device = &numbers_on_device_;
  std::vector<Tensor> grads(params_.size());
  std::vector<SgdSlot> slots;
  for (size_t i : recorded_) {
    grads[i] = params_[i].grad();
    slots.push_back(SgdSlot{&params_[i], &grads[i], &momentum_buffers_[i], false});
  }
  if (!slots.empty()) backend_for(params_[0].device()).sgd_step_all(slots, hp, &skip_flag_);
}

// The numbers eager mode passes as kernel arguments (SgdArgs), rounded to float the same way;
// SGD's do not depend on the step count.
std::vector<float> SGD::recorded_numbers_ahead(int64_t) const {
  return {static_cast<float>(lr_), static_cast<float>(options_.momentum)};
}

std::string SGD::describe() const {
  std::ostringstream os;
  os << "SGD(lr=" << lr_ << ", momentum=" << options_.momentum << ", dampening=" << options_.dampening
     << ", weight_decay=" << options_.weight_decay << ", nesterov=" << (options_.nesterov ? "true" : "false") << ")";
  return os.str();
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < momentum_buffers_.size(); ++i)
    if (momentum_buffers_[i].defined()) out.emplace_back(std::to_string(i) + ".momentum_buffer", momentum_buffers_[i]);
  return out;
}

void SGD::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  for (const auto& [key, value] : state) {
    size_t i = 0;
    std::string name;
    Tensor t = restored_state(key, value, i, name);
    NNLAB_CHECK(name == "momentum_buffer", "SGD has no state '", name, "' (from '", key, "')");
    momentum_buffers_[i] = t;
  }
}

}  // namespace nnlab
