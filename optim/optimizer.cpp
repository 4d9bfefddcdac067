#include "optim/optimizer.h"

#include "autograd/ops.h"

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
