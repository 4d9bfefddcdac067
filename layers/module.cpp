#include "layers/module.h"

namespace nnlab {

Tensor Module::forward_fused(const Tensor& x, const Epilogue& epilogue) {
  NNLAB_CHECK(epilogue.none(), describe(), " takes no fused epilogue (only Conv2d, Linear and MaxPool2d do)");
  return forward(x);
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  parameters_.emplace_back(name, std::move(t));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::collect(const std::string& prefix, bool buffers,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : buffers ? buffers_ : parameters_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", buffers, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  for (auto& [name, t] : named_parameters()) t.move_to_(device);
  for (auto& [name, t] : named_buffers()) t.move_to_(device);
}

void Module::to(DType dtype) {
  for (auto& [name, t] : named_parameters()) t.convert_to_(dtype);
  for (auto& [name, t] : named_buffers())
    if (t.dtype() == DType::Float32 || t.dtype() == DType::Float64) t.convert_to_(dtype);
}

void Module::initialize(uint64_t seed) {
  uint32_t stream = 0;
  reset_parameters(seed, stream);
}

void Module::reset_parameters(uint64_t seed, uint32_t& next_stream) {
  for (auto& [name, child] : children_) child->reset_parameters(seed, next_stream);
}

Device Module::device() const {
  const auto params = named_parameters();
  return params.empty() ? Device::cpu() : params.front().second.device();
}

}  // namespace nnlab
