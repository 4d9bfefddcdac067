#include "layers/precision.h"

#include <algorithm>

#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

DType precision_storage_dtype(const std::string& precision, const char* option) {
  if (precision == "fp32" || precision == "tf32") return DType::Float32;
  if (precision == "bf16") return DType::BFloat16;
  fail(option, ": '", precision, "' is not a precision (fp32, tf32 or bf16)");
}

DType precision_storage_dtype(const std::string& precision, Device device, const char* option) {
  const DType dtype = precision_storage_dtype(precision, option);
  if (dtype != DType::BFloat16) return dtype;
  const std::string obstacle = backend_for(device).bf16_obstacle();
  NNLAB_CHECK(obstacle.empty(), option, " bf16 cannot run here: ", obstacle,
              "; run it there in fp32, or on the CPU (which emulates bf16)");
  return dtype;
}

namespace {
thread_local WeightCopies* g_scope = nullptr;
}  // namespace

WeightCopies::WeightCopies(std::vector<Tensor>& wanted) : wanted_(wanted), enclosing_(g_scope) {
  masters_.swap(wanted_);  // refilled by take() as this forward asks
  bool one_device = !masters_.empty();
  for (const Tensor& m : masters_) one_device = one_device && m.device() == masters_.front().device();
  if (one_device) {
    for (const Tensor& m : masters_) copies_.push_back(Tensor::empty(m.shape(), DType::BFloat16, m.device()));
    backend_for(masters_.front().device()).cast_all(masters_, copies_);
  } else {
    masters_.clear();
  }
  g_scope = this;
}

WeightCopies::~WeightCopies() { g_scope = enclosing_; }

Tensor WeightCopies::take(const Tensor& param) {
  const auto same = [&](const Tensor& t) { return t.raw_data() == param.raw_data() && t.shape() == param.shape(); };
  if (std::none_of(wanted_.begin(), wanted_.end(), same)) wanted_.push_back(param);  // a shared weight: once
  for (size_t i = 0; i < masters_.size(); ++i)
    if (same(masters_[i])) return copies_[i];
  return Tensor();
}

Tensor compute_copy(const Tensor& param, const Tensor& x) {
  if (!param.defined() || x.dtype() != DType::BFloat16 || param.dtype() == DType::BFloat16) return param;
  if (g_scope && param.dtype() == DType::Float32)
    if (const Tensor copy = g_scope->take(param); copy.defined()) return cast_made(param, copy);
  return cast(param, DType::BFloat16);
}

}  // namespace nnlab
