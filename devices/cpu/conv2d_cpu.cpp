// Convolution on the CPU. Each call asks the router (conv2d_plan.cpp) for its plan, records the
// plan once in the kernel log (what `nnlab explain` prints under each layer, with the plan's
// reason) and runs the plan's kernel, which decides nothing more. The algorithms, each in its
// own file:
//   reference          conv2d_reference_cpu.cpp  the definition as plain loops (--conv-impl reference)
//   direct             conv2d_direct_cpu.cpp     vector loops over shifted rows: few input channels
//                      (+ _channels, _images)    or channels, or a batch's images, in the lanes
//   winograd           conv2d_winograd_cpu.cpp   F(2×2,3×3): 16 instead of 36 multiplies per 2×2
//                                                output tile and channel pair, as 16 small products;
//                                                F(4×4,3×3): 36 instead of 144 per 4×4 tile
//   im2col+small_gemm  conv2d_im2col_cpu.cpp     receptive fields as columns, one product per image:
//   im2col+blas                                  small_gemm.h's loops, or OpenBLAS
// Which zoo layer takes which path, and the measurements behind each rule: docs/cpu-kernels.md.
#include "devices/bf16_widening.h"
#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/conv2d_im2col.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

using cpu::ConvAlgorithm;
using cpu::ConvDirection;
using cpu::ConvPlan;

// How the plan does the call, after the geometry in its kernel-log line.
std::string plan_detail(const ConvPlan& plan, const Conv2dGeometry& g, ConvDirection direction, DType dtype) {
  switch (plan.algorithm) {
    case ConvAlgorithm::Reference: return "the definition as loops (conv2d_reference_cpu.cpp)";
    case ConvAlgorithm::Direct: return cpu::direct_layout_name(plan.layout);
    case ConvAlgorithm::Winograd: {
      const int side = int(plan.tile) + 2;  // transformed tile: side² products per image chunk
      return std::string(cpu::winograd_tile_name(plan.tile)) + ", " + std::to_string(side * side) +
             " products per image chunk" +
             (cpu::winograd_channel_lanes(direction, g, dtype) ? ", transforms with 16 channels in the lanes" : "");
    }
    case ConvAlgorithm::Im2colSmallGemm:
      return "small_gemm " + cpu::im2col_product_text(g, direction) + " ×" + std::to_string(g.n) + " images";
    case ConvAlgorithm::Im2colBlas:
      return std::string(dtype == DType::Float64 ? "cblas_dgemm " : "cblas_sgemm ") +
             cpu::im2col_product_text(g, direction) + " ×" + std::to_string(g.n) + " images";
  }
  return "";
}

// The plan of a call, recorded once: "winograd conv2d fwd x 64×32×14×14 w 64×32×3×3 s1 p1:
// F(2×2,3×3), 16 products per image chunk (why: 3×3, stride 1, ...)".
// timing: the caller's, which then times the whole call under this record.
const ConvPlan& plan_and_log(const Conv2dGeometry& g, ConvDirection direction, DType dtype,
                             const Pool2dGeometry* pool, KernelTiming& timing) {
  const ConvPlan& plan = cpu::plan_conv(g, direction, dtype, conv_impl(), pool);
  if (kernel_log_enabled())
    timing.attach(record_kernel(cpu::conv_algorithm_name(plan.algorithm),
                  std::string("conv2d ") + cpu::conv_direction_name(direction) + " x " +
                      dims_text({g.n, g.c, g.h, g.w}) + " w " + dims_text({g.k, g.c, g.r, g.s}) + " s" +
                      std::to_string(g.stride_h) + " p" + std::to_string(g.pad_h) + ": " +
                      plan_detail(plan, g, direction, dtype) + " (why: " + plan.reason + ")"));
  return plan;
}

void check_conv_dtypes(const char* kernel, const Tensor& a, const Tensor& b, const Tensor& c) {
  NNLAB_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), kernel, ": dtypes differ: ", a.describe(), ", ",
              b.describe(), ", ", c.describe());
}

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q), then max(0, y) when relu
// and the algorithm takes it (the direct and Winograd kernels floor each image or plane as they
// write it, still in the cache). Returns whether y is floored.
bool run_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) {
  check_conv_dtypes("conv2d_forward", x, w, y);
  KernelTiming timing;  // for nnlab explain
  const ConvPlan& plan = plan_and_log(g, ConvDirection::Forward, x.dtype(), nullptr, timing);
  switch (plan.algorithm) {
    case ConvAlgorithm::Direct: cpu::direct_forward(g, plan.layout, x, w, b, y, relu); return relu;
    case ConvAlgorithm::Winograd: cpu::winograd_forward(g, plan.tile, x, w, b, y, relu); return relu;
    case ConvAlgorithm::Reference: cpu::conv2d_reference_forward(g, x, w, b, y); return false;
    case ConvAlgorithm::Im2colSmallGemm:
    case ConvAlgorithm::Im2colBlas: cpu::im2col_forward(g, x, w, b, y, plan.algorithm); return false;
  }
  return false;
}

}  // namespace

void CpuBackend::convolve(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& z) {
  run_forward(g, x, w, b, z, false);
}

// The epilogue fused where the plan can: a ReLU floors each plane or image as the direct and
// Winograd kernels write it (the reference loops and im2col, whose time the ReLU hardly
// changes, get the ReLU's own kernel in place); a 2×2 max-pool of the whole output, where
// Winograd or the direct row layout runs, pools each output plane as the kernel writes it,
// still in the L1 cache, so the unpooled output (8 MB at cifar-cnn's c2, 1.2 MB at lenet5's c1)
// is never stored nor read back. Anything else: Backend's convolution, then the pool.
void CpuBackend::conv2d_forward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x, const Tensor& w,
                                const Tensor* b, Tensor& y, Tensor* argmax) {
  if (bf16::widened(*this, &CpuBackend::conv2d_forward, g, e, x, w, b, y, argmax)) return;
  if (e.kind == ConvEpilogue::Kind::None) return convolve(g, x, w, b, y);
  if (e.kind == ConvEpilogue::Kind::Relu) {
    if (!run_forward(g, x, w, b, y, true)) unary_forward(UnaryOp::Relu, y, y);
    return;
  }
  const ConvPlan& plan = cpu::plan_conv(g, ConvDirection::Forward, x.dtype(), conv_impl(), &e.pool);
  if (!plan.pools) return Backend::conv2d_forward(g, e, x, w, b, y, argmax);
  NNLAB_CHECK(argmax, "conv2d_forward: a max-pool epilogue needs its argmax tensor");
  check_conv_dtypes("conv2d_forward", x, w, y);
  KernelTiming timing;  // for nnlab explain: the convolution's record times the whole call
  plan_and_log(g, ConvDirection::Forward, x.dtype(), &e.pool, timing);
  if (kernel_log_enabled()) record_kernel("maxpool2d_forward (in the convolution)", tensor_dims(y));
  if (plan.algorithm == ConvAlgorithm::Winograd)
    cpu::winograd_forward_maxpool(g, plan.tile, e.pool, x, w, b, y, *argmax);
  else
    cpu::direct_forward_maxpool(g, e.pool, x, w, b, y, *argmax);
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void CpuBackend::convolve_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  check_conv_dtypes("conv2d_backward_data", dy, w, dx);
  KernelTiming timing;  // for nnlab explain
  const ConvPlan& plan = plan_and_log(g, ConvDirection::BackwardData, dy.dtype(), nullptr, timing);
  switch (plan.algorithm) {
    case ConvAlgorithm::Reference: return cpu::conv2d_reference_backward_data(g, dy, w, dx);
    case ConvAlgorithm::Direct: return cpu::direct_backward_data(g, plan.layout, dy, w, dx);
    case ConvAlgorithm::Winograd: return cpu::winograd_backward_data(g, plan.tile, dy, w, dx);
    case ConvAlgorithm::Im2colSmallGemm:
    case ConvAlgorithm::Im2colBlas: return cpu::im2col_backward_data(g, dy, w, dx);
  }
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
// With db, the bias gradient too: the direct, Winograd and im2col kernels sum each plane of dy
// as they read it for the filter gradient (bias_lanes.h, bias_backward's order and bits); the
// reference loops leave it to bias_backward.
void CpuBackend::convolve_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw,
                                          Tensor* db) {
  check_conv_dtypes("conv2d_backward_filter", dy, x, dw);
  KernelTiming timing;  // for nnlab explain: the filter gradient's record times the whole call
  const ConvPlan& plan = plan_and_log(g, ConvDirection::BackwardFilter, dy.dtype(), nullptr, timing);
  if (db && plan.algorithm != ConvAlgorithm::Reference && kernel_log_enabled())
    record_kernel("bias_backward (in the filter gradient)", tensor_dims(dy));
  switch (plan.algorithm) {
    case ConvAlgorithm::Reference:
      cpu::conv2d_reference_backward_filter(g, dy, x, dw);
      if (db) bias_backward(dy, *db, g.p * g.q);
      return;
    case ConvAlgorithm::Direct: return cpu::direct_backward_filter(g, plan.layout, dy, x, dw, db);
    case ConvAlgorithm::Winograd: return cpu::winograd_backward_filter(g, plan.tile, dy, x, dw, db);
    case ConvAlgorithm::Im2colSmallGemm:
    case ConvAlgorithm::Im2colBlas: return cpu::im2col_backward_filter(g, dy, x, dw, db, plan.algorithm);
  }
}

// Two fusions, else Backend's backward (dz stored, then the pieces above):
// - max-pool: where the plans pool, the pool's gradient is routed to the winners plane by
//   plane as the Winograd kernels (both gradients; 8 MB written and 16 MB read less at
//   cifar-cnn's c2) or the direct filter gradient (a first layer: lenet5's c1) read dz. The
//   bias sums come from those planes, in bias_backward's order.
// - ReLU of a first layer (no dx) whose filter gradient runs on im2col (cifar-cnn's and
//   resnet8's c1): dz = dy·[y > 0] made image by image and used at once, never stored whole.
void CpuBackend::conv2d_backward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy,
                                 const Tensor& saved, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                 Tensor& db) {
  if (bf16::widened(*this, &CpuBackend::conv2d_backward, g, e, dy, saved, x, w, dx, dw, db)) return;
  const DType dtype = dy.dtype();
  if (e.kind == ConvEpilogue::Kind::ReluMaxPool && dw.defined() && db.defined()) {
    const ConvPlan& filter = cpu::plan_conv(g, ConvDirection::BackwardFilter, dtype, conv_impl(), &e.pool);
    const bool data_pools =
        !dx.defined() || cpu::plan_conv(g, ConvDirection::BackwardData, dtype, conv_impl(), &e.pool).pools;
    if (filter.pools && data_pools) {
      check_conv_dtypes("conv2d_backward_filter", dy, x, dw);
      {
        KernelTiming timing;  // for nnlab explain
        plan_and_log(g, ConvDirection::BackwardFilter, dtype, &e.pool, timing);
        if (kernel_log_enabled()) {
          record_kernel("maxpool2d_backward (in the convolution)", tensor_dims(dy));
          record_kernel("bias_backward (in the filter gradient)", dims_text({g.n, g.k, g.p, g.q}));
        }
        if (filter.algorithm == ConvAlgorithm::Winograd)
          cpu::winograd_backward_filter_unpool(g, filter.tile, e.pool, dy, saved, x, dw, &db);
        else
          cpu::direct_backward_filter_unpool(g, filter.layout, e.pool, dy, saved, x, dw, &db);
      }
      if (!dx.defined()) return;
      check_conv_dtypes("conv2d_backward_data", dy, w, dx);
      KernelTiming timing;
      const ConvPlan& data = plan_and_log(g, ConvDirection::BackwardData, dtype, &e.pool, timing);
      return cpu::winograd_backward_data_unpool(g, data.tile, e.pool, dy, saved, w, dx);
    }
  }
  if (e.kind == ConvEpilogue::Kind::Relu && !dx.defined() && dw.defined()) {
    const ConvPlan& filter = cpu::plan_conv(g, ConvDirection::BackwardFilter, dtype, conv_impl());
    if (filter.algorithm == ConvAlgorithm::Im2colSmallGemm || filter.algorithm == ConvAlgorithm::Im2colBlas) {
      check_conv_dtypes("conv2d_backward_filter", dy, x, dw);
      KernelTiming timing;  // for nnlab explain: the filter gradient's record, then the fused pass's
      plan_and_log(g, ConvDirection::BackwardFilter, dtype, nullptr, timing);
      return cpu::im2col_relu_backward_params(g, saved, dy, x, dw, db.defined() ? &db : nullptr, filter.algorithm);
    }
  }
  Backend::conv2d_backward(g, e, dy, saved, x, w, dx, dw, db);
}

}  // namespace nnlab
