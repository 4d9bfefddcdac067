#include "devices/backend.h"

#include <cmath>

namespace nnlab {

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Tanh: return "tanh";
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
  }
  return "?";
}

void Backend::missing(const char* kernel) const {
  fail("kernel '", kernel, "' is not implemented on ", device_.str(), " (", name(),
       "); nnlab does not fall back to another device — run this op on a device that implements it");
}

void Backend::copy_from_host(Tensor&, const void*) { missing("copy_from_host"); }
void Backend::increment_counter(Tensor&) { missing("increment_counter"); }
void Backend::gather_rows_at(const Tensor&, const Tensor&, const Tensor&, Tensor&) { missing("gather_rows_at"); }
void Backend::gather_images_at(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  missing("gather_images_at");
}
void Backend::check_gather_position(const Tensor& order, const Tensor& position, const Tensor& out) {
  NNLAB_CHECK(order.dtype() == DType::Int32 && order.device() == out.device(), "gather_at: the order must be int32 on ",
              out.device().str(), ", not ", order.describe());
  check_device_counter("gather_at", "position", position, out.device());
}
void Backend::gather_images(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  missing("gather_images");
}
void Backend::check_gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts,
                                  const Tensor& mean_std, const Tensor& out, bool at) {
  const Device& on = out.device();
  NNLAB_CHECK(out.dtype() == DType::Float32 && out.shape().size() == 4, "gather_images: the batch must be float32 ",
              "(b, c, h, w), not ", out.describe());
  const int64_t b = out.dim(0), c = out.dim(1);
  NNLAB_CHECK((rows.dtype() == DType::UInt8 || rows.dtype() == DType::Float32) && rows.device() == on &&
                  rows.shape().size() == 4 && rows.dim(1) == c && rows.dim(2) == out.dim(2) && rows.dim(3) == out.dim(3),
              "gather_images: the images must be uint8 or float32 (n, ", c, ", ", out.dim(2), ", ", out.dim(3), ") on ",
              on.str(), ", not ", rows.describe());
  NNLAB_CHECK(index.dtype() == DType::Int32 && index.device() == on && (at || index.numel() == b),
              "gather_images: ", at ? "the order" : "the index", " must be int32 on ", on.str(),
              at ? "" : " with one entry per image of the batch", ", not ", index.describe(), " for ", out.describe());
  NNLAB_CHECK(!shifts.defined() || (shifts.dtype() == DType::Int32 && shifts.device() == on &&
                                    shifts.shape() == Shape{index.numel(), 3}),
              "gather_images: the crops and flips must be int32 (", index.numel(), ", 3) on ", on.str(), ", not ",
              shifts.describe());
  NNLAB_CHECK(!mean_std.defined() || (mean_std.dtype() == DType::Float32 && mean_std.device() == on &&
                                      mean_std.shape() == Shape{2, c}),
              "gather_images: the normalisation must be float32 (2, ", c, ") = {mean; std} on ", on.str(), ", not ",
              mean_std.describe());
}
std::unique_ptr<StepGraph> Backend::capture(const std::function<void()>&) { missing("capture (CUDA graphs)"); }
void Backend::copy_to_host(const Tensor&, void*) { missing("copy_to_host"); }
void Backend::copy(const Tensor&, Tensor&) { missing("copy"); }
void Backend::fill(Tensor&, double) { missing("fill"); }
void Backend::cast(const Tensor&, Tensor&) { missing("cast"); }
void Backend::cast_all(const std::vector<Tensor>& src, std::vector<Tensor>& dst) {
  NNLAB_CHECK(src.size() == dst.size(), "cast_all: ", src.size(), " sources for ", dst.size(), " outputs");
  for (size_t i = 0; i < src.size(); ++i) cast(src[i], dst[i]);
}
void Backend::gather_rows(const Tensor&, const Tensor&, Tensor&) { missing("gather_rows"); }
void check_gemm_operands(int64_t m, int64_t n, int64_t k, const Tensor& a, const Tensor& b, const Tensor& c) {
  const bool bf16_inputs = a.dtype() == DType::BFloat16 && b.dtype() == DType::BFloat16 &&
                           (c.dtype() == DType::BFloat16 || c.dtype() == DType::Float32);
  NNLAB_CHECK(bf16_inputs || (a.dtype() == b.dtype() && a.dtype() == c.dtype() && a.dtype() != DType::BFloat16),
              "gemm: dtypes differ: ", a.describe(), ", ", b.describe(), ", ", c.describe(),
              " (A, B and C alike, or bf16 A and B with a bf16 or float32 C)");
  NNLAB_CHECK(a.numel() >= m * k && b.numel() >= k * n && c.numel() >= m * n, "gemm ", m, "×", n, "×", k,
              ": buffers too small: ", a.describe(), ", ", b.describe(), ", ", c.describe());
}
void Backend::gemm(bool, bool, int64_t, int64_t, int64_t, double, const Tensor&, const Tensor&, double, Tensor&) {
  missing("gemm");
}
void Backend::binary_forward(BinaryOp, const Tensor&, const Tensor&, Tensor&) { missing("binary_forward"); }
void Backend::binary_backward(BinaryOp, const Tensor&, const Tensor&, const Tensor&, Tensor*, Tensor*) {
  missing("binary_backward");
}
void Backend::unary_forward(UnaryOp, const Tensor&, Tensor&) { missing("unary_forward"); }
void Backend::unary_backward(UnaryOp, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  missing("unary_backward");
}
void Backend::axpby(double, const Tensor&, double, Tensor&) { missing("axpby"); }
void Backend::bias_forward(Tensor&, const Tensor&, int64_t) { missing("bias_forward"); }
void Backend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) {
  gemm(false, true, x.dim(0), w.dim(0), x.dim(1), 1.0, x, w, 0.0, y);
  if (b && b->defined()) bias_forward(y, *b, 1);
  if (relu) unary_forward(UnaryOp::Relu, y, y);
}
void Backend::linear_backward(const Tensor& dy, const Tensor* relu_output, const Tensor& x, const Tensor& w,
                              Tensor* dx, Tensor* dw, Tensor* db) {
  if (!relu_output) {
    if (db) bias_backward(dy, *db, 1);
    return linear_products(dy, x, w, dx, dw);
  }
  Tensor dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  relu_bias_backward(*relu_output, dy, dz, db, 1);
  linear_products(dz, x, w, dx, dw);
}
void Backend::linear_products(const Tensor& dz, const Tensor& x, const Tensor& w, Tensor* dx, Tensor* dw) {
  if (dx) gemm(false, false, x.dim(0), x.dim(1), w.dim(0), 1.0, dz, w, 0.0, *dx);
  if (dw) gemm(true, false, w.dim(0), x.dim(1), x.dim(0), 1.0, dz, x, 0.0, *dw);
}
void Backend::bias_backward(const Tensor&, Tensor&, int64_t) { missing("bias_backward"); }
void Backend::relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner) {
  unary_backward(UnaryOp::Relu, y, y, dy, dz);  // the sign test on y: y > 0 ⇔ the input > 0
  if (db) bias_backward(dz, *db, inner);
}
void Backend::sum_all(const Tensor&, double, Tensor&) { missing("sum_all"); }
void Backend::sum_squares(const Tensor&, Tensor&) { missing("sum_squares"); }
void Backend::log_softmax_forward(const Tensor&, Tensor&) { missing("log_softmax_forward"); }
void Backend::log_softmax_backward(const Tensor&, const Tensor&, Tensor&) { missing("log_softmax_backward"); }
void Backend::softmax_xent_forward(const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor*, NonFiniteMark) {
  missing("softmax_xent_forward");
}
void Backend::softmax_xent_backward(const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  missing("softmax_xent_backward");
}
void Backend::count_correct(const Tensor&, const Tensor&, Tensor&) { missing("count_correct"); }
void Backend::check_finite(const Tensor&, Tensor&, NonFiniteMark) { missing("check_finite"); }
void Backend::check_finite_all(const std::vector<Tensor>& xs, Tensor& flag, const std::vector<NonFiniteMark>& marks,
                               const Tensor* step_number) {
  NNLAB_CHECK(xs.size() == marks.size(), "check_finite_all: ", xs.size(), " tensors but ", marks.size(), " marks");
  NNLAB_CHECK(!step_number, "check_finite_all: a step number read on the device is not supported on ",
              device().str());
  for (size_t i = 0; i < xs.size(); ++i) check_finite(xs[i], flag, marks[i]);
}
AdamCorrections adam_corrections(const AdamParams& hp, int64_t step) {
  const double bc1 = 1.0 - std::pow(hp.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(hp.beta2, static_cast<double>(step));
  return {hp.lr / bc1, std::sqrt(bc2)};
}

void Backend::check_device_counter(const char* op, const char* what, const Tensor& counter, const Device& device) {
  NNLAB_CHECK(counter.dtype() == DType::Int32 && counter.numel() == 1 && counter.device() == device, op, ": the ", what,
              " must be one int32 on ", device.str(), ", not ", counter.describe());
}

void Backend::check_slot_gradients(const std::vector<SgdSlot>& slots, Tensor* skip_flag) {
  std::vector<Tensor> checked;
  std::vector<NonFiniteMark> marks;
  for (const SgdSlot& s : slots)
    if (s.check_grad) checked.push_back(*s.grad), marks.push_back(s.grad_mark);
  NNLAB_CHECK(checked.empty() || (skip_flag && skip_flag->defined()),
              "sgd_step_all: checking gradients needs a non-finite flag to raise");
  if (!checked.empty()) check_finite_all(checked, *skip_flag, marks, nullptr);
}
void Backend::sgd_step_all(const std::vector<SgdSlot>& slots, const SgdParams& hp, Tensor* skip_flag) {
  NNLAB_CHECK(!hp.on_device, "sgd_step_all: numbers read on the device are for CUDA graphs; ", device().str(),
              " takes them as arguments");
  check_slot_gradients(slots, skip_flag);
  for (const SgdSlot& s : slots) sgd_step(*s.param, *s.grad, *s.momentum_buf, hp, s.first_step, skip_flag);
}
void Backend::sgd_step(Tensor&, const Tensor&, Tensor&, const SgdParams&, bool, const Tensor*) {
  missing("sgd_step");
}
void Backend::adam_step(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamParams&, int64_t, const Tensor*) {
  missing("adam_step");
}
void Backend::adam_step_all(const std::vector<AdamSlot>& slots, const AdamParams& hp, const Tensor* skip_flag) {
  NNLAB_CHECK(!hp.on_device, "adam_step_all: numbers read on the device are for CUDA graphs; ", device().str(),
              " takes them as arguments");
  for (const AdamSlot& s : slots) adam_step(*s.param, *s.grad, *s.exp_avg, *s.exp_avg_sq, hp, s.step, skip_flag);
}
void Backend::conv2d_forward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x, const Tensor& w,
                             const Tensor* b, Tensor& y, Tensor* argmax) {
  switch (e.kind) {
    case ConvEpilogue::Kind::None: return convolve(g, x, w, b, y);
    case ConvEpilogue::Kind::Relu:
      convolve(g, x, w, b, y);
      return unary_forward(UnaryOp::Relu, y, y);
    case ConvEpilogue::Kind::ReluMaxPool: {
      NNLAB_CHECK(argmax, "conv2d_forward: a max-pool epilogue needs its argmax tensor");
      Tensor z = Tensor::empty({g.n, g.k, g.p, g.q}, x.dtype(), x.device());
      convolve(g, x, w, b, z);
      return maxpool2d_forward(e.pool, z, y, *argmax);
    }
  }
}
void Backend::conv2d_backward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy, const Tensor& saved,
                              const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db) {
  Tensor dz = dy;
  bool bias_done = !db.defined();
  if (e.kind == ConvEpilogue::Kind::Relu) {  // the mask and the bias gradient in one pass
    dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    relu_bias_backward(saved, dy, dz, db.defined() ? &db : nullptr, g.p * g.q);
    bias_done = true;
  } else if (e.kind == ConvEpilogue::Kind::ReluMaxPool) {  // dy routed to each window's winner
    dz = Tensor::empty({g.n, g.k, g.p, g.q}, dy.dtype(), dy.device());
    maxpool2d_backward(e.pool, dy, saved, dz);
  }
  if (dw.defined()) {
    convolve_backward_filter(g, dz, x, dw, bias_done ? nullptr : &db);
    bias_done = true;
  }
  if (!bias_done) bias_backward(dz, db, g.p * g.q);  // dz as (n, k, p·q)
  if (dx.defined()) convolve_backward_data(g, dz, w, dx);
}
void Backend::convolve(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor*, Tensor&) {
  missing("conv2d_forward");
}
void Backend::convolve_backward_data(const Conv2dGeometry&, const Tensor&, const Tensor&, Tensor&) {
  missing("conv2d_backward (data)");
}
void Backend::convolve_backward_filter(const Conv2dGeometry&, const Tensor&, const Tensor&, Tensor&, Tensor*) {
  missing("conv2d_backward (filter)");
}
void Backend::maxpool2d_forward(const Pool2dGeometry&, const Tensor&, Tensor&, Tensor&) {
  missing("maxpool2d_forward");
}
void Backend::maxpool2d_backward(const Pool2dGeometry&, const Tensor&, const Tensor&, Tensor&) {
  missing("maxpool2d_backward");
}
void Backend::avgpool2d_forward(const Pool2dGeometry&, const Tensor&, Tensor&) { missing("avgpool2d_forward"); }
void Backend::avgpool2d_backward(const Pool2dGeometry&, const Tensor&, Tensor&) { missing("avgpool2d_backward"); }
void Backend::batchnorm_forward_train(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, double, double,
                                      Tensor&, Tensor&, Tensor&) {
  missing("batchnorm_forward_train");
}
void Backend::batchnorm_forward_eval(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                     double, Tensor&) {
  missing("batchnorm_forward_eval");
}
void Backend::batchnorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                                 Tensor&, Tensor&) {
  missing("batchnorm_backward");
}
void Backend::dropout_forward(const Tensor&, double, uint64_t, uint32_t, const Tensor*, Tensor&, Tensor&) {
  missing("dropout_forward");
}
void Backend::dropout_backward(const Tensor&, const Tensor&, double, Tensor&) { missing("dropout_backward"); }

}  // namespace nnlab
