// Log-softmax, and cross-entropy fused with its softmax (one kernel each way, stable).
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y = log softmax(x)   ->   dx = dy − softmax(x) · Σ_row dy
class LogSoftmaxBackward : public Node {
 public:
  LogSoftmaxBackward(const Tensor& x, const Tensor& y) : Node({x}), y_(y.detach()) {}
  std::string name() const override { return "LogSoftmaxBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor dx = Tensor::empty(y_.shape(), y_.dtype(), y_.device());
    backend_for(dx.device()).log_softmax_backward(y_, dy, dx);
    return {dx};
  }

 protected:
  void release_saved() override { y_ = Tensor(); }

 private:
  Tensor y_;
};

// L = −(1/n) Σ_i log softmax(z_i)[y_i]   ->   dz = dL · (softmax(z) − onehot(y)) / n
// dz in the logits' dtype (bf16 logits: computed in float32, rounded once as it is stored).
class CrossEntropyBackward : public Node {
 public:
  CrossEntropyBackward(const Tensor& logits, const Tensor& labels, const Tensor& probs)
      : Node({logits}), labels_(labels), probs_(probs), logits_dtype_(logits.dtype()) {}
  std::string name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> backward(const Tensor& dloss) override {
    Tensor dz = Tensor::empty(probs_.shape(), logits_dtype_, probs_.device());
    backend_for(dz.device()).softmax_xent_backward(probs_, labels_, dloss, dz);
    return {dz};
  }

 protected:
  void release_saved() override {
    labels_ = Tensor();
    probs_ = Tensor();
  }

 private:
  Tensor labels_, probs_;
  DType logits_dtype_;
};

}  // namespace

Tensor log_softmax(const Tensor& x) {
  check_float("log_softmax", x);
  NNLAB_CHECK(x.ndim() == 2 && x.dim(1) > 0, "log_softmax: expected (n, c), got ", x.describe());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend_for(x.device()).log_softmax_forward(x, y);
  if (needs_graph({&x})) attach(y, std::make_shared<LogSoftmaxBackward>(x, y));
  return y;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* nonfinite_flag, NonFiniteMark mark) {
  check_float("cross_entropy", logits);
  check_same_device("cross_entropy", {&logits, &labels});
  check_dtype("cross_entropy (labels)", labels, DType::Int32);
  NNLAB_CHECK(logits.ndim() == 2 && logits.dim(1) > 0 && labels.ndim() == 1 && labels.dim(0) == logits.dim(0),
              "cross_entropy: logits ", logits.describe(), " and labels ", labels.describe(),
              " do not match (need logits (n, c) and labels (n))");
  NNLAB_CHECK(logits.dim(0) > 0, "cross_entropy: empty batch");
  if (nonfinite_flag && nonfinite_flag->defined())
    check_nonfinite_flag("cross_entropy", *nonfinite_flag, logits.device(), mark);
  // bf16 logits (a bf16 model's, Sequential::forward_for_loss): softmax and loss in float32,
  // as after a cast to float32, without the cast's pass over the logits and their gradient.
  const DType dtype = logits.dtype() == DType::BFloat16 ? DType::Float32 : logits.dtype();
  Tensor probs = Tensor::empty(logits.shape(), dtype, logits.device());
  Tensor loss = Tensor::empty({}, dtype, logits.device());
  backend_for(logits.device()).softmax_xent_forward(logits, labels, probs, loss, nonfinite_flag, mark);
  if (needs_graph({&logits})) attach(loss, std::make_shared<CrossEntropyBackward>(logits, labels, probs));
  return loss;
}

void accumulate_correct(const Tensor& logits, const Tensor& labels, Tensor& correct) {
  check_same_device("accumulate_correct", {&logits, &labels, &correct});
  check_dtype("accumulate_correct (labels)", labels, DType::Int32);
  check_dtype("accumulate_correct (counter)", correct, DType::Int32);
  NNLAB_CHECK(logits.ndim() == 2 && labels.ndim() == 1 && labels.dim(0) == logits.dim(0),
              "accumulate_correct: logits ", logits.describe(), " and labels ", labels.describe(), " do not match");
  backend_for(logits.device()).count_correct(logits, labels, correct);
}

}  // namespace nnlab
