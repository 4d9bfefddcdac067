// Sequential: children run in order; each is registered under the name given, so the
// parameters read as in the PyTorch twin ("fc1.weight", "c1.bias").
#pragma once
#include <memory>
#include <vector>

#include "layers/module.h"
#include "layers/precision.h"

namespace nnlab {

class Sequential : public Module {
 public:
  using Child = std::pair<std::string, std::shared_ptr<Module>>;
  // One step of forward(): a child, or a group of children run as one op, the first with the
  // others as its epilogue ("c1+pool1+relu1": the Conv2d c1 with a max-pool and ReLU epilogue).
  struct Step {
    std::string name;
    std::shared_ptr<Module> layer;
    Epilogue epilogue;
    Tensor run(const Tensor& x) const { return epilogue.none() ? layer->forward(x) : layer->forward_fused(x, epilogue); }
    // "Conv2d(1, 32, …) + MaxPool2d(kernel_size=2, stride=2, padding=0) + ReLU()"
    std::string describe() const { return layer->describe() + epilogue.describe(); }
  };

  Sequential& add(const std::string& name, std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& x) override;
  // forward() without its last cast: a bf16 model's logits stay bf16, for cross_entropy, which
  // reads them as they are and computes in float32 (one kernel fewer each way than the cast
  // and its gradient). The same values: forward(x) is forward_for_loss(x) cast to x's dtype.
  Tensor forward_for_loss(const Tensor& x);
  // What forward() runs: the children in the order added, one step each, until a pass
  // regroups them (fuse_epilogues, layers/fuse_epilogues.h). `explain` walks this order as
  // well; `--check-numerics` runs the children one by one, so that a fault is named at its
  // own layer.
  const std::vector<Step>& run_order() const { return run_order_; }
  void set_run_order(std::vector<Step> steps);
  // Whether a pass has regrouped the children (describe() then lists the groups).
  bool fused() const { return fused_; }
  std::string describe() const override;
  size_t size() const { return children().size(); }
  // Mixed precision (layers/precision.h): forward() casts its input to `dtype` (bf16), runs the
  // children in it and casts the output back to the input's dtype. Float32, the default, is
  // no cast. Set on the model's outermost Sequential only.
  void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return compute_dtype_; }
  // With a bf16 compute dtype, the scope forward() runs its steps in: the bf16 copies of the
  // weights its last forward cast, made in one call (WeightCopies); null otherwise. explain,
  // which runs the steps itself, opens it too.
  std::unique_ptr<WeightCopies> weight_copies();

 private:
  std::vector<Step> run_order_;
  bool fused_ = false;
  DType compute_dtype_ = DType::Float32;
  std::vector<Tensor> bf16_weights_;  // the weights the last bf16 forward cast (WeightCopies)
};

}  // namespace nnlab
