#include "layers/sequential.h"

namespace nnlab {

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> layer) {
  for (const auto& [existing, child] : children())
    NNLAB_CHECK(existing != name, "Sequential: a layer named '", name, "' already exists");
  register_module(name, layer);
  run_order_.push_back(Step{name, std::move(layer), Epilogue{}});
  fused_ = false;
  return *this;
}

void Sequential::set_run_order(std::vector<Step> steps) {
  run_order_ = std::move(steps);
  fused_ = true;
}

void Sequential::set_compute_dtype(DType dtype) {
  NNLAB_CHECK(dtype == DType::Float32 || dtype == DType::BFloat16, "Sequential: the compute dtype must be float32 or ",
              "bfloat16, got ", dtype_name(dtype));
  compute_dtype_ = dtype;
}

Tensor Sequential::forward(const Tensor& x) {
  const Tensor logits = forward_for_loss(x);
  return compute_dtype_ == DType::BFloat16 ? cast(logits, x.dtype()) : logits;
}

Tensor Sequential::forward_for_loss(const Tensor& x) {
  const std::unique_ptr<WeightCopies> copies = weight_copies();  // null unless bf16
  Tensor h = compute_dtype_ == DType::BFloat16 ? cast(x, compute_dtype_) : x;
  for (const Step& step : run_order_) h = step.run(h);
  return h;
}

std::unique_ptr<WeightCopies> Sequential::weight_copies() {
  if (compute_dtype_ != DType::BFloat16) return nullptr;
  return std::make_unique<WeightCopies>(bf16_weights_);
}

std::string Sequential::describe() const {
  std::string out = "Sequential(\n";
  for (const auto& [name, layer] : children()) out += "  (" + name + "): " + layer->describe() + "\n";
  out += ")";
  if (!fused_) return out;
  std::string groups;
  for (const Step& step : run_order_)
    if (!step.epilogue.none()) groups += "\n  " + step.name + ": " + step.describe();
  return groups.empty() ? out : out + "\nfuse_epilogues ran these groups as one op each:" + groups;
}

}  // namespace nnlab
