// Adam and AdamW, as torch.optim.Adam / AdamW (no amsgrad).
#include <sstream>

#include "devices/registry.h"
#include "optim/optimizer.h"

namespace nnlab {

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params)), options_(options), decoupled_(decoupled_weight_decay) {
  NNLAB_CHECK(options.lr >= 0 && options.eps >= 0 && options.weight_decay >= 0,
              "Adam: lr, eps and weight decay must be non-negative");
  NNLAB_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
              "Adam: betas must lie in [0, 1), got ", options.beta1, ", ", options.beta2);
  lr_ = options.lr;
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  param_steps_.assign(params_.size(), 0);
}

namespace {
AdamParams adam_params(double lr, const AdamOptions& o, bool decoupled) {
  return AdamParams{lr, o.beta1, o.beta2, o.eps, o.weight_decay, decoupled};
}
}  // namespace

void Adam::step() {
  const AdamParams hp = adam_params(lr_, options_, decoupled_);
  // One call per device for all its parameters (one launch per 32 of them on CUDA).
  std::vector<Tensor> grads(params_.size());
  std::vector<AdamSlot> slots;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    grads[i] = p.grad();
    if (!grads[i].defined()) continue;
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = Tensor::zeros(p.shape(), p.dtype(), p.device());
      exp_avg_sq_[i] = Tensor::zeros(p.shape(), p.dtype(), p.device());
    }
    if (!slots.empty() && slots[0].param->device() != p.device()) {
      backend_for(slots[0].param->device()).adam_step_all(slots, hp, &skip_flag_);
      slots.clear();
    }
    slots.push_back(AdamSlot{&p, &grads[i], &exp_avg_[i], &exp_avg_sq_[i], ++param_steps_[i]});
  }
  if (!slots.empty()) backend_for(slots[0].param->device()).adam_step_all(slots, hp, &skip_flag_);
  ++steps_;
}

void Adam::record_update() {
  recorded_ = parameters_to_record("exp_avg", exp_avg_);
  AdamParams hp = adam_params(lr_, options_, decoupled_);
  hp.on_device = &numbers_on_device_;
  std::vector<Tensor> grads(params_.size());
  std::vector<AdamSlot> slots;
  for (size_t i : recorded_) {
    grads[i] = params_[i].grad();
    slots.push_back(AdamSlot{&params_[i], &grads[i], &exp_avg_[i], &exp_avg_sq_[i], param_steps_[i] + 1});
  }
  if (!slots.empty()) backend_for(params_[0].device()).adam_step_all(slots, hp, &skip_flag_);
}

// The numbers eager mode passes as kernel arguments (AdamArgs and the list's corrections), for
// the step `ahead` after the next: each parameter's step counted as step() counts it.
std::vector<float> Adam::recorded_numbers_ahead(int64_t ahead) const {
  const AdamParams hp = adam_params(lr_, options_, decoupled_);
  std::vector<float> numbers{static_cast<float>(1.0 - hp.lr * hp.weight_decay), static_cast<float>(hp.beta1),
                             static_cast<float>(1.0 - hp.beta1)};
  for (size_t i : recorded_) {
    const AdamCorrections c = adam_corrections(hp, param_steps_[i] + 1 + ahead);
    numbers.push_back(static_cast<float>(c.step_size));
    numbers.push_back(static_cast<float>(c.bc2_sqrt));
  }
  return numbers;
}

void Adam::advance_recorded_step() {
  for (size_t i : recorded_) ++param_steps_[i];
  ++steps_;
}

std::string Adam::describe() const {
  std::ostringstream os;
  os << (decoupled_ ? "AdamW" : "Adam") << "(lr=" << lr_ << ", betas=(" << options_.beta1 << ", " << options_.beta2
     << "), eps=" << options_.eps << ", weight_decay=" << options_.weight_decay << ")";
  return os.str();
}

std::vector<std::pair<std::string, Tensor>> Adam::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < exp_avg_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    out.emplace_back(std::to_string(i) + ".exp_avg", exp_avg_[i]);
    out.emplace_back(std::to_string(i) + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  return out;
}

void Adam::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  for (const auto& [key, value] : state) {
    size_t i = 0;
    std::string name;
    Tensor t = restored_state(key, value, i, name);
    NNLAB_CHECK(name == "exp_avg" || name == "exp_avg_sq", "Adam has no state '", name, "' (from '", key, "')");
    (name == "exp_avg" ? exp_avg_ : exp_avg_sq_)[i] = t;
  }
}

void Adam::set_param_steps(std::vector<int64_t> steps) {
  NNLAB_CHECK(steps.size() == params_.size(), "Adam: ", steps.size(), " step counts for ", params_.size(),
              " parameters");
  param_steps_ = std::move(steps);
}

}  // namespace nnlab
