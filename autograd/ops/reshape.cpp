// Reshape and flatten: the data is contiguous, so the output is a view of the same storage
// and the gradient is dy viewed back in the input's shape. No kernel runs.
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace nnlab {

namespace {

// y = x viewed as another shape   ->   dx = dy viewed as x's shape
class ReshapeBackward : public Node {
 public:
  explicit ReshapeBackward(const Tensor& x) : Node({x}) {}
  std::string name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy.view(inputs()[0].shape())}; }
};

}  // namespace

Tensor reshape(const Tensor& x, Shape shape) {
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      NNLAB_CHECK(inferred < 0, "reshape: more than one -1 in ", shape_str(shape));
      inferred = static_cast<int64_t>(i);
    } else {
      NNLAB_CHECK(shape[i] >= 0, "reshape: negative extent in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    NNLAB_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot infer -1 in ", shape_str(shape), " for ",
                x.describe());
    shape[inferred] = x.numel() / known;
  }
  NNLAB_CHECK(shape_numel(shape) == x.numel(), "reshape: ", x.describe(), " has ", x.numel(),
              " elements; shape ", shape_str(shape), " holds ", shape_numel(shape));
  Tensor y = x.view(shape);
  if (needs_graph({&x})) attach(y, std::make_shared<ReshapeBackward>(x));
  return y;
}

Tensor flatten(const Tensor& x) {
  NNLAB_CHECK(x.ndim() >= 1, "flatten: needs at least one dimension, got ", x.describe());
  return reshape(x, {x.dim(0), -1});
}

}  // namespace nnlab
