// Convolution on the CPU: the router. One function, choose_conv_algorithm, picks the algorithm
// for a call's geometry, direction and dtype; the three kernels below switch on its answer and
// record it once in the kernel log, which is what `nnlab explain` prints under each layer.
// The algorithms, each in its own file:
//   reference          conv2d_reference_cpu.cpp  the definition as plain loops (--conv-impl reference)
//   direct             conv2d_direct_cpu.cpp     vector loops over shifted rows: few input channels
//                      (+ _channels, _images)    or channels, or a batch's images, in the lanes
//   winograd           conv2d_winograd_cpu.cpp   F(2×2,3×3): 16 instead of 36 multiplies per 2×2
//                                                output tile and channel pair, as 16 small products;
//                                                F(4×4,3×3): 36 instead of 144 per 4×4 tile
//   im2col+small_gemm  conv2d_im2col_cpu.cpp     receptive fields as columns, one product per image:
//   im2col+blas                                  small_gemm.h's loops, or OpenBLAS
//
// --conv-impl auto (the default) takes the first rule that applies:
//   1. winograd   3×3 filter, stride 1, padding ≤ 2, at least 8 channels in and out
//                 (conv2d_winograd.h); all three directions. F(4×4,3×3) for the forward and
//                 data gradient of planes of at least 28×28 outputs, F(2×2,3×3) for the rest
//                 and every filter gradient (winograd_tile below).
//   2. direct     stride 1, padding < filter, at most 7 input channels, c·r·s ≥ 25 taps
//                 (conv2d_direct.h); the filter gradient only for k ≤ 8 or p·q ≤ 256.
//   3. im2col     the rest; its product goes to small_gemm for float32 when the inner
//                 dimension c·r·s ≤ 64 (forward and filter gradient), else to OpenBLAS.
// --conv-impl im2col applies rule 3 to every call; reference runs the teaching loops.
//
// Which zoo layer takes which path under auto (mlp has no convolution), with the measurements
// behind the rules (docs/benchmarks-history.md; per step at batch 64 unless said):
//   cnn, cnn-bn  c1  1→32 3×3 p1    im2col+small_gemm forward and filter gradient (no data
//                                   gradient: the input needs none). One input channel is too
//                                   few for Winograd, 9 taps too few for direct: its direct
//                                   loops ran forward 0.25–0.29 → 0.20–0.27 ms but the filter
//                                   gradient 0.37–0.59 → 0.65 ms, so dropped; small_gemm over
//                                   OpenBLAS took c1 0.87–0.90 → 0.61–0.62 ms.
//                c2  32→64 3×3 p1   winograd in all directions: the cnn's epoch went from
//                                   1.77–1.96× PyTorch's (im2col) to 1.02–1.32×; with
//                                   small_gemm's products c2 6.76–6.82 → 3.69–3.72 ms.
//   lenet5       c1  1→6 5×5 p2     direct forward and filter gradient: 0.34 / 0.46 ms against
//                                   im2col's 0.86 / 0.88 ms. Filter gradient with the images in
//                                   the lanes (batches of 16 or more): 0.079 → 0.054–0.059 ms
//                                   on two threads; both directions pool image by image.
//                c2  6→16 5×5 p0    direct in all directions: 0.62 / 1.07 / 1.01 ms against
//                                   im2col's 1.67 / 1.49 / 1.97 ms. Forward and filter
//                                   gradient with the channels in the lanes (rows of 10):
//                                   forward 0.229 → 0.163 ms on one core (scripts/bench_conv.cpp).
//                                   Input gradient with the images in the lanes (batches of
//                                   16 or more): 0.138 → 0.100 ms on two threads.
//   cifar-cnn    c1  3→32 3×3 p1    direct forward (2.11 ms against im2col's 2.49), then
//                                   im2col+small_gemm filter gradient: 32 channels over 32×32
//                                   planes took direct 4.55 ms against im2col's 2.69.
//                c2–c4 (32/64 ch)   winograd in all directions; c2's (32×32) forward and data
//                                   gradient in F(4×4). 2 threads, ms, best of 10 in 12 runs
//                                   over 2 minutes: the median run, and the fastest
//                                   (scripts/bench_conv.cpp, 2026-11-25 07:37):
//                                          F(2×2) fwd / data / filter   F(4×4) fwd / data / filter
//                                     c2   1.83 / 1.85 / 2.09           1.86 / 1.89 / 3.42
//                                          fastest 1.74 / 1.76 / 1.94   1.42 / 1.40 / 2.01
//                                     c3   0.83 / 0.90 / 1.00           0.92 / 1.33 / 1.67
//                                          fastest 0.80 / 0.86 / 0.96   0.68 / 0.78 / 1.10
//                                     c4   1.51 / 1.55 / 1.82           1.64 / 1.65 / 3.10
//                                          fastest 1.46 / 1.50 / 1.77   1.18 / 1.19 / 2.29
//                                   One thread, F(4×4) is faster in every forward and data
//                                   gradient (c2 2.58 against 3.48 ms), but on two its lead
//                                   comes and goes with the machine's other load (not measured
//                                   why; by arithmetic its transformed filters and tiles can
//                                   overflow a core's 1 MB L2, F(2×2)'s do not), while
//                                   F(2×2) holds steady; only c2's forward and data gradient
//                                   never lost by more than 2%. The cnn's 14×14 c2 keeps
//                                   F(2×2) in every direction.
//   resnet8      conv1 3→16 3×3     as cifar-cnn's c1 (16 channels over 32×32 planes).
//                3×3 stride 1       winograd in all directions.
//                3×3 stride 2 and   im2col: small_gemm where c·r·s ≤ 64 (the 1×1 shortcuts),
//                1×1 shortcuts      OpenBLAS for the rest and for every data gradient.
#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/conv2d_im2col.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace cpu {

// The shapes of rules 1 and 2, the same whichever instruction set runs the kernels (their
// loops are compiled once per set: cpu_isa.h).
bool winograd_applies(const Conv2dGeometry& g) {
  return g.r == 3 && g.s == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= 2 && g.pad_w <= 2 &&
         g.c >= kWinogradMinChannels && g.k >= kWinogradMinChannels && g.p >= 1 && g.q >= 1;
}

// The measurements behind this rule are in the header above. The larger tile saves more
// multiplies, but its transforms cost more per tile, it wastes more of a plane whose side is
// not a multiple of 4, and its filter gradient reduces over 4× fewer tiles per product. Where
// it won, it won by less on two threads than on one, and on this machine's busy spells lost
// its lead on two threads everywhere but the 32×32 forward and data gradient.
WinogradTile winograd_tile(const Conv2dGeometry& g, ConvDirection direction) {
  const bool wide = g.p >= 28 && g.q >= 28;
  return wide && direction != ConvDirection::BackwardFilter ? WinogradTile::F4x4 : WinogradTile::F2x2;
}

const char* winograd_tile_name(WinogradTile tile) {
  return tile == WinogradTile::F4x4 ? "F(4×4,3×3)" : "F(2×2,3×3)";
}

bool direct_applies(const Conv2dGeometry& g, ConvDirection direction) {
  const bool shape = g.stride_h == 1 && g.stride_w == 1 && g.pad_h < g.r && g.pad_w < g.s &&
                     g.c <= kDirectMaxChannels && g.c * g.r * g.s >= kDirectMinTaps;
  if (direction != ConvDirection::BackwardFilter) return shape;
  return shape && (g.k <= kDirectBlock || g.p * g.q <= 256);
}

// The shapes the direct filter gradient's channel layout serves: whole vectors of output
// channels, rows that would leave lanes of its row layout idle, and a filter width it has an
// instance for.
bool channel_layout_pays(const Conv2dGeometry& g) {
  return g.k % kDirectLanes == 0 && g.q % kDirectLanes != 0 && (g.s == 3 || g.s == 5);
}

bool channel_forward_pays(const Conv2dGeometry& g) { return channel_layout_pays(g) && g.p >= 2; }

bool images_layout_pays(const Conv2dGeometry& g) {
  // A thread's two buffers hold 16 images' dy and dx: at most 1 MB (lenet5's c2: 194 KB), so
  // a large plane keeps the row layout's per-image copies instead of a buffer per thread of
  // hundreds of megabytes.
  constexpr int64_t kMostFloats = int64_t(1) << 18;
  const int64_t floats = kDirectLanes * (g.k * (g.p + 2) * g.q + g.c * g.h * g.w);
  return g.n >= kDirectLanes && floats <= kMostFloats;
}

bool images_filter_pays(const Conv2dGeometry& g) {
  // The buffers: 16 images' bordered x, and their dy twice (unpooled planes, then interleaved).
  constexpr int64_t kMostFloats = int64_t(1) << 18;
  const int64_t floats =
      kDirectLanes * (g.c * (g.h + 2 * g.pad_h) * (g.w + 2 * g.pad_w) + 2 * kDirectBlock * g.p * g.q);
  return !channel_layout_pays(g) && g.k <= kDirectBlock && g.n >= kDirectLanes && floats <= kMostFloats;
}

const char* direct_method(const Conv2dGeometry& g, ConvDirection direction) {
  const bool channels = (direction == ConvDirection::BackwardFilter && channel_layout_pays(g)) ||
                        (direction == ConvDirection::Forward && channel_forward_pays(g));
  if (direction == ConvDirection::BackwardData && images_layout_pays(g)) return "images in the vector lanes";
  if (direction == ConvDirection::BackwardFilter && images_filter_pays(g)) return "images in the vector lanes";
  return channels ? "output channels in the vector lanes" : "vector loops over shifted rows";
}

ConvAlgorithm choose_conv_algorithm(const Conv2dGeometry& g, ConvDirection direction, DType dtype,
                                    ConvImpl requested) {
  check_conv_impl(requested, Device::cpu());  // cudnn is refused here
  if (requested == ConvImpl::Reference) return ConvAlgorithm::Reference;
  if (requested == ConvImpl::Auto && winograd_applies(g)) return ConvAlgorithm::Winograd;
  if (requested == ConvImpl::Auto && direct_applies(g, direction)) return ConvAlgorithm::Direct;
  // small_gemm has float32 NN and NT loops; backward data's Wᵀ · dy is TN.
  const bool small_product = dtype == DType::Float32 && direction != ConvDirection::BackwardData &&
                             g.c * g.r * g.s <= kSmallGemmMaxDepth;
  return small_product ? ConvAlgorithm::Im2colSmallGemm : ConvAlgorithm::Im2colBlas;
}

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::Reference: return "reference";
    case ConvAlgorithm::Direct: return "direct";
    case ConvAlgorithm::Winograd: return "winograd";
    case ConvAlgorithm::Im2colSmallGemm: return "im2col+small_gemm";
    case ConvAlgorithm::Im2colBlas: return "im2col+blas";
  }
  return "?";
}

const char* conv_direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::Forward: return "fwd";
    case ConvDirection::BackwardData: return "bwd data";
    case ConvDirection::BackwardFilter: return "bwd filter";
  }
  return "?";
}

}  // namespace cpu

namespace {

using cpu::ConvAlgorithm;
using cpu::ConvDirection;

// How the chosen algorithm does the call, after the geometry in its kernel-log line.
std::string algorithm_detail(ConvAlgorithm algorithm, const Conv2dGeometry& g, ConvDirection direction, DType dtype) {
  switch (algorithm) {
    case ConvAlgorithm::Reference: return "the definition as loops (conv2d_reference_cpu.cpp)";
    case ConvAlgorithm::Direct: return cpu::direct_method(g, direction);
    case ConvAlgorithm::Winograd: {
      const cpu::WinogradTile tile = cpu::winograd_tile(g, direction);
      const int side = int(tile) + 2;  // transformed tile: side² products per image chunk
      return std::string(cpu::winograd_tile_name(tile)) + ", " + std::to_string(side * side) +
             " products per image chunk";
    }
    case ConvAlgorithm::Im2colSmallGemm:
      return "small_gemm " + cpu::im2col_product_text(g, direction) + " ×" + std::to_string(g.n) + " images";
    case ConvAlgorithm::Im2colBlas:
      return std::string(dtype == DType::Float64 ? "cblas_dgemm " : "cblas_sgemm ") +
             cpu::im2col_product_text(g, direction) + " ×" + std::to_string(g.n) + " images";
  }
  return "";
}

// The one choice per call, recorded once: "winograd conv2d fwd x 64×32×14×14 w 64×32×3×3 s1 p1:
// F(2×2,3×3), 16 products per image chunk".
// timing: the caller's, which then times the whole call under this record.
ConvAlgorithm choose_and_log(const Conv2dGeometry& g, ConvDirection direction, DType dtype, KernelTiming& timing) {
  const ConvAlgorithm algorithm = cpu::choose_conv_algorithm(g, direction, dtype, conv_impl());
  if (kernel_log_enabled())
    timing.attach(record_kernel(cpu::conv_algorithm_name(algorithm),
                  std::string("conv2d ") + cpu::conv_direction_name(direction) + " x " +
                      dims_text({g.n, g.c, g.h, g.w}) + " w " + dims_text({g.k, g.c, g.r, g.s}) + " s" +
                      std::to_string(g.stride_h) + " p" + std::to_string(g.pad_h) + ": " +
                      algorithm_detail(algorithm, g, direction, dtype)));
  return algorithm;
}

void check_conv_dtypes(const char* kernel, const Tensor& a, const Tensor& b, const Tensor& c) {
  NNLAB_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), kernel, ": dtypes differ: ", a.describe(), ", ",
              b.describe(), ", ", c.describe());
}

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q), then max(0, y) when relu
// and the algorithm takes it (the direct and Winograd kernels floor each image or plane as they
// write it, still in the cache). Returns whether y is floored.
bool forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) {
  check_conv_dtypes("conv2d_forward", x, w, y);
  KernelTiming timing;  // for nnlab explain
  const ConvAlgorithm algorithm = choose_and_log(g, ConvDirection::Forward, x.dtype(), timing);
  switch (algorithm) {
    case ConvAlgorithm::Direct: cpu::direct_forward(g, x, w, b, y, relu); return relu;
    case ConvAlgorithm::Winograd:
      cpu::winograd_forward(g, cpu::winograd_tile(g, ConvDirection::Forward), x, w, b, y, relu);
      return relu;
    case ConvAlgorithm::Reference: cpu::conv2d_reference_forward(g, x, w, b, y); return false;
    case ConvAlgorithm::Im2colSmallGemm:
    case ConvAlgorithm::Im2colBlas: cpu::im2col_forward(g, x, w, b, y, algorithm); return false;
  }
  return false;
}

}  // namespace

void CpuBackend::conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                                Tensor& y) {
  forward(g, x, w, b, y, false);
}

// The algorithms that do not floor their output (the reference loops, im2col), whose time the
// ReLU hardly changes, get the ReLU's own kernel in place.
void CpuBackend::conv2d_relu_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                                     Tensor& y) {
  if (!forward(g, x, w, b, y, true)) unary_forward(UnaryOp::Relu, y, y);
}

namespace {

// Whether the pool after the convolution is the 2×2 one of its whole output, which the
// Winograd and the direct row-layout kernels pool (or unpool) plane by plane as they pass.
bool pools_2x2_whole_output(const Conv2dGeometry& g, const Pool2dGeometry& pg) {
  return pg.kernel_h == 2 && pg.kernel_w == 2 && pg.stride_h == 2 && pg.stride_w == 2 && pg.pad_h == 0 &&
         pg.pad_w == 0 && pg.h == g.p && pg.w == g.q;
}

// Whether the convolution runs Winograd in every direction given and the pool is that one.
bool pools_winograd_planes(const Conv2dGeometry& g, const Pool2dGeometry& pg, DType dtype,
                           std::initializer_list<ConvDirection> directions) {
  for (ConvDirection d : directions)
    if (cpu::choose_conv_algorithm(g, d, dtype, conv_impl()) != ConvAlgorithm::Winograd) return false;
  return pools_2x2_whole_output(g, pg);
}

// Whether the direct kernels' row layout runs the direction (forward or filter gradient: the
// channel layout's planes are made for the whole batch at once) and the pool is that one.
bool pools_direct_rows(const Conv2dGeometry& g, const Pool2dGeometry& pg, DType dtype, ConvDirection direction) {
  if (cpu::choose_conv_algorithm(g, direction, dtype, conv_impl()) != ConvAlgorithm::Direct) return false;
  const bool channels = direction == ConvDirection::Forward ? cpu::channel_forward_pays(g) : cpu::channel_layout_pays(g);
  return !channels && pools_2x2_whole_output(g, pg);
}

}  // namespace

// The convolution and the max-pool (+ ReLU) after it: where Winograd or the direct row layout
// runs the forward and the pool is the 2×2 one, each output plane is pooled as the kernel writes
// it, still in the L1 cache, and the unpooled output (8 MB at cifar-cnn's c2, 1.2 MB at lenet5's
// c1) is never stored nor read back; the values and winners are the two kernels' (the same plane
// loop as maxpool2d_forward). Anything else: the convolution, then the pool (Backend's default).
void CpuBackend::conv2d_maxpool_relu_forward(const Conv2dGeometry& g, const Pool2dGeometry& pg, const Tensor& x,
                                             const Tensor& w, const Tensor* b, Tensor& y, Tensor& argmax) {
  const bool winograd = pools_winograd_planes(g, pg, x.dtype(), {ConvDirection::Forward});
  if (!winograd && !pools_direct_rows(g, pg, x.dtype(), ConvDirection::Forward))
    return Backend::conv2d_maxpool_relu_forward(g, pg, x, w, b, y, argmax);
  check_conv_dtypes("conv2d_forward", x, w, y);
  KernelTiming timing;  // for nnlab explain: the convolution's record times the whole call
  choose_and_log(g, ConvDirection::Forward, x.dtype(), timing);
  if (kernel_log_enabled()) record_kernel("maxpool2d_forward (in the convolution)", tensor_dims(y));
  if (winograd)
    cpu::winograd_forward_maxpool(g, cpu::winograd_tile(g, ConvDirection::Forward), pg, x, w, b, y, argmax);
  else
    cpu::direct_forward_maxpool(g, pg, x, w, b, y, argmax);
}

// Its backward: where Winograd runs both gradients, the pool's gradient is routed to the
// winners plane by plane as the two kernels read dz (twice: 8 MB written and 16 MB read less at
// cifar-cnn's c2); where the input needs no gradient (dx undefined: a first layer) and the direct
// row layout runs the filter gradient, image by image as that kernel reads dz (lenet5's c1). The
// bias sums come from those planes, in bias_backward's order.
void CpuBackend::conv2d_maxpool_relu_backward(const Conv2dGeometry& g, const Pool2dGeometry& pg, const Tensor& dy,
                                              const Tensor& argmax, const Tensor& x, const Tensor& w, Tensor& dx,
                                              Tensor& dw, Tensor& db) {
  const bool want_dx = dx.defined();
  const bool winograd =
      want_dx ? pools_winograd_planes(g, pg, dy.dtype(), {ConvDirection::BackwardData, ConvDirection::BackwardFilter})
              : pools_winograd_planes(g, pg, dy.dtype(), {ConvDirection::BackwardFilter});
  const bool direct = !want_dx && !winograd && pools_direct_rows(g, pg, dy.dtype(), ConvDirection::BackwardFilter);
  if (!winograd && !direct) return Backend::conv2d_maxpool_relu_backward(g, pg, dy, argmax, x, w, dx, dw, db);
  check_conv_dtypes("conv2d_backward_filter", dy, x, dw);
  {
    KernelTiming timing;  // for nnlab explain
    choose_and_log(g, ConvDirection::BackwardFilter, dy.dtype(), timing);
    if (kernel_log_enabled()) {
      record_kernel("maxpool2d_backward (in the convolution)", tensor_dims(dy));
      record_kernel("bias_backward (in the filter gradient)", dims_text({g.n, g.k, g.p, g.q}));
    }
    if (winograd)
      cpu::winograd_backward_filter_unpool(g, cpu::winograd_tile(g, ConvDirection::BackwardFilter), pg, dy, argmax,
                                           x, dw, &db);
    else
      cpu::direct_backward_filter_unpool(g, pg, dy, argmax, x, dw, &db);
  }
  if (!want_dx) return;
  check_conv_dtypes("conv2d_backward_data", dy, w, dx);
  KernelTiming timing;
  choose_and_log(g, ConvDirection::BackwardData, dy.dtype(), timing);
  cpu::winograd_backward_data_unpool(g, cpu::winograd_tile(g, ConvDirection::BackwardData), pg, dy, argmax, w, dx);
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void CpuBackend::conv2d_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  check_conv_dtypes("conv2d_backward_data", dy, w, dx);
  KernelTiming timing;  // for nnlab explain
  switch (choose_and_log(g, ConvDirection::BackwardData, dy.dtype(), timing)) {
    case ConvAlgorithm::Reference: return cpu::conv2d_reference_backward_data(g, dy, w, dx);
    case ConvAlgorithm::Direct: return cpu::direct_backward_data(g, dy, w, dx);
    case ConvAlgorithm::Winograd:
      return cpu::winograd_backward_data(g, cpu::winograd_tile(g, ConvDirection::BackwardData), dy, w, dx);
    case ConvAlgorithm::Im2colSmallGemm:
    case ConvAlgorithm::Im2colBlas: return cpu::im2col_backward_data(g, dy, w, dx);
  }
}

namespace {

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
// With db, the bias gradient too: the direct, Winograd and im2col kernels sum each plane of dy
// as they read it for the filter gradient (bias_lanes.h, bias_backward's order and bits); the
// reference loops leave it to bias_backward.
void backward_filter(CpuBackend& be, const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw,
                     Tensor* db) {
  check_conv_dtypes("conv2d_backward_filter", dy, x, dw);
  KernelTiming timing;  // for nnlab explain: the filter gradient's record times the whole call
  const ConvAlgorithm algorithm = choose_and_log(g, ConvDirection::BackwardFilter, dy.dtype(), timing);
  if (db && algorithm != ConvAlgorithm::Reference && kernel_log_enabled())
    record_kernel("bias_backward (in the filter gradient)", tensor_dims(dy));
  switch (algorithm) {
    case ConvAlgorithm::Reference:
      cpu::conv2d_reference_backward_filter(g, dy, x, dw);
      if (db) be.bias_backward(dy, *db, g.p * g.q);
      return;
    case ConvAlgorithm::Direct: return cpu::direct_backward_filter(g, dy, x, dw, db);
    case ConvAlgorithm::Winograd:
      return cpu::winograd_backward_filter(g, cpu::winograd_tile(g, ConvDirection::BackwardFilter), dy, x, dw, db);
    case ConvAlgorithm::Im2colSmallGemm:
    case ConvAlgorithm::Im2colBlas: return cpu::im2col_backward_filter(g, dy, x, dw, db, algorithm);
  }
}

}  // namespace

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
void CpuBackend::conv2d_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw) {
  backward_filter(*this, g, dy, x, dw, nullptr);
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k)
void CpuBackend::conv2d_backward_params(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw,
                                        Tensor& db) {
  backward_filter(*this, g, dy, x, dw, &db);
}

// y, dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
// Fused where the filter gradient runs on im2col (the first layers of cifar-cnn and resnet8);
// the other algorithms take the two kernels (Backend's default).
void CpuBackend::conv2d_relu_backward_params(const Conv2dGeometry& g, const Tensor& y, const Tensor& dy,
                                             const Tensor& x, Tensor& dw, Tensor* db) {
  check_conv_dtypes("conv2d_relu_backward_params", dy, x, dw);
  const ConvAlgorithm algorithm =
      cpu::choose_conv_algorithm(g, ConvDirection::BackwardFilter, dy.dtype(), conv_impl());
  if (algorithm != ConvAlgorithm::Im2colSmallGemm && algorithm != ConvAlgorithm::Im2colBlas)
    return Backend::conv2d_relu_backward_params(g, y, dy, x, dw, db);
  KernelTiming timing;  // for nnlab explain: the filter gradient's record, then the fused pass's
  choose_and_log(g, ConvDirection::BackwardFilter, dy.dtype(), timing);
  cpu::im2col_relu_backward_params(g, y, dy, x, dw, db, algorithm);
}

}  // namespace nnlab
