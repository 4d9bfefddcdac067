// CUDA kernels against their CPU twins: convolution (cuDNN), pooling, a convolution with its
// pool fused, batch normalisation, dropout, and the Philox generator (host and device words
// bit-identical).
#include <algorithm>

#include "gpu/gpu_support.h"

#include "core/philox.h"
#include "devices/conv_impl.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/kernel_log.h"
#include "conv_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

Conv2dGeometry conv_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                             int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  return {n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, (h + 2 * pad_h - r) / stride_h + 1,
          (w + 2 * pad_w - s) / stride_w + 1};
}

Pool2dGeometry pool_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                             int64_t ph, int64_t pw) {
  return {n, c, h, w, kh, kw, sh, sw, ph, pw, (h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1};
}

Tensor gpu_empty(const Shape& s, DType t = DType::Float32) { return Tensor::empty(s, t, Device::cuda(0)); }

void check_conv(const Conv2dGeometry& g) {
  const std::string what = "conv x(" + std::to_string(g.n) + "," + std::to_string(g.c) + "," + std::to_string(g.h) +
                           "," + std::to_string(g.w) + ") w(" + std::to_string(g.k) + "," + std::to_string(g.r) + "," +
                           std::to_string(g.s) + ") stride " + std::to_string(g.stride_h) + "," +
                           std::to_string(g.stride_w) + " pad " + std::to_string(g.pad_h) + "," + std::to_string(g.pad_w);
  // Each output sums c·r·s products of values in [−1, 1): scale the tolerance with that.
  const double atol = 1e-6 * static_cast<double>(g.c * g.r * g.s) + 1e-6;
  Tensor x = fresh_tensor({g.n, g.c, g.h, g.w}), w = fresh_tensor({g.k, g.c, g.r, g.s}), b = fresh_tensor({g.k});
  Tensor y = Tensor::empty({g.n, g.k, g.p, g.q}), gy = gpu_empty({g.n, g.k, g.p, g.q});
  const Tensor gb = on_gpu(b);
  nnlab_test::conv_forward(cpu(), g, x, w, &b, y);
  nnlab_test::conv_forward(gpu(), g, on_gpu(x), on_gpu(w), &gb, gy);
  require_allclose(gy, y, 1e-5, atol, what + " forward");
  Tensor dy = fresh_tensor({g.n, g.k, g.p, g.q});
  Tensor dx = Tensor::empty({g.n, g.c, g.h, g.w}), gdx = gpu_empty({g.n, g.c, g.h, g.w});
  nnlab_test::conv_backward_data(cpu(), g, dy, w, dx);
  nnlab_test::conv_backward_data(gpu(), g, on_gpu(dy), on_gpu(w), gdx);
  require_allclose(gdx, dx, 1e-5, 1e-6 * static_cast<double>(g.k * g.r * g.s) + 1e-6, what + " backward data");
  Tensor dw = Tensor::empty({g.k, g.c, g.r, g.s}), gdw = gpu_empty({g.k, g.c, g.r, g.s});
  nnlab_test::conv_backward_filter(cpu(), g, dy, x, dw);
  nnlab_test::conv_backward_filter(gpu(), g, on_gpu(dy), on_gpu(x), gdw);
  const double sum_atol = 1e-6 * static_cast<double>(g.n * g.p * g.q) + 1e-6;
  require_allclose(gdw, dw, 1e-5, sum_atol, what + " backward filter");
  // The weight and bias gradients in one call (the CPU's fused filter gradients; CUDA's filter
  // gradient, then bias_backward), and those of a first layer with a ReLU epilogue, y = relu(conv).
  Tensor db = Tensor::empty({g.k}), gdb = gpu_empty({g.k});
  nnlab_test::conv_backward_filter(cpu(), g, dy, x, dw, &db);
  nnlab_test::conv_backward_filter(gpu(), g, on_gpu(dy), on_gpu(x), gdw, &gdb);
  require_allclose(gdw, dw, 1e-5, sum_atol, what + " weight gradient with the bias");
  require_allclose(gdb, db, 1e-5, sum_atol, what + " bias gradient with the weights");
  Tensor y_relu = y.clone();
  cpu().unary_forward(UnaryOp::Relu, y, y_relu);
  ConvEpilogue relu;
  relu.kind = ConvEpilogue::Kind::Relu;
  Tensor no_dx, gpu_no_dx;
  cpu().conv2d_backward(g, relu, dy, y_relu, x, w, no_dx, dw, db);
  gpu().conv2d_backward(g, relu, on_gpu(dy), on_gpu(y_relu), on_gpu(x), on_gpu(w), gpu_no_dx, gdw, gdb);
  require_allclose(gdw, dw, 1e-5, sum_atol, what + " first layer's weight gradient through its ReLU");
  require_allclose(gdb, db, 1e-5, sum_atol, what + " first layer's bias gradient through its ReLU");
}

}  // namespace

TEST_CASE("gpu: cuDNN convolution matches the CPU's own choice of algorithm per shape", "[gpu][conv2d]") {
  // The CPU side runs whatever its plan says (direct loops, Winograd, im2col + small_gemm or
  // OpenBLAS: see devices/cpu/conv2d_plan.cpp); cuDNN runs its own algorithms.
  // Both must compute the same cross-correlation.
  const std::vector<Conv2dGeometry> shapes = {
      conv_geometry(1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0),     conv_geometry(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1),
      conv_geometry(3, 5, 9, 7, 6, 5, 3, 2, 1, 2, 1),     conv_geometry(1, 1, 28, 28, 8, 5, 5, 1, 1, 0, 0),
      conv_geometry(16, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1), conv_geometry(2, 4, 11, 13, 3, 2, 4, 3, 2, 0, 1)};
  for (bool deterministic : {false, true}) {
    set_cuda_deterministic(deterministic);
    for (const Conv2dGeometry& g : shapes) check_conv(g);
  }
  set_cuda_deterministic(false);
}

TEST_CASE("gpu: max and average pooling match the CPU exactly", "[gpu][pool2d]") {
  const std::vector<Pool2dGeometry> shapes = {
      pool_geometry(2, 3, 8, 8, 2, 2, 2, 2, 0, 0), pool_geometry(2, 2, 7, 9, 3, 3, 2, 2, 1, 1),
      pool_geometry(1, 4, 5, 5, 3, 3, 1, 1, 1, 1), pool_geometry(3, 2, 6, 6, 2, 3, 1, 2, 1, 1),
      pool_geometry(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), pool_geometry(64, 32, 28, 28, 2, 2, 2, 2, 0, 0),
      pool_geometry(4, 16, 10, 10, 2, 2, 2, 2, 0, 0)};  // lenet5's pool2: the CPU's rows-to-a-vector path
  for (const Pool2dGeometry& g : shapes) {
    const Shape xs{g.n, g.c, g.h, g.w}, ys{g.n, g.c, g.p, g.q};
    // Few distinct values (−2 … 2), so windows hold ties: both devices must pick the same
    // (first) one; with the fused ReLU, many windows' max is not positive (no winner).
    Tensor x = fresh_tensor(xs, -2.5, 2.5).to(DType::Int32).to(DType::Float32), dy = fresh_tensor(ys);
    Tensor y = Tensor::empty(ys), arg = Tensor::empty(ys, DType::Int32), dx = Tensor::empty(xs);
    Tensor gy = gpu_empty(ys), garg = gpu_empty(ys, DType::Int32), gdx = gpu_empty(xs);
    for (bool relu : {false, true}) {
      Pool2dGeometry gm = g;
      gm.relu = relu;
      INFO("max-pool" << (relu ? " with the fused ReLU" : ""));
      cpu().maxpool2d_forward(gm, x, y, arg);
      gpu().maxpool2d_forward(gm, on_gpu(x), gy, garg);
      require_equal<float>(gy, y, "maxpool forward");
      require_equal<int32_t>(garg, arg, "maxpool argmax");
      cpu().maxpool2d_backward(gm, dy, arg, dx);
      gpu().maxpool2d_backward(gm, on_gpu(dy), garg, gdx);
      require_allclose(gdx, dx, 1e-6, 1e-7, "maxpool backward");
    }
    cpu().avgpool2d_forward(g, x, y);
    gpu().avgpool2d_forward(g, on_gpu(x), gy);
    require_allclose(gy, y, 1e-6, 1e-7, "avgpool forward");
    cpu().avgpool2d_backward(g, dy, dx);
    gpu().avgpool2d_backward(g, on_gpu(dy), gdx);
    require_allclose(gdx, dx, 1e-6, 1e-7, "avgpool backward");
  }
}

TEST_CASE("gpu: a convolution with its max-pool and ReLU fused matches the CPU's", "[gpu][conv2d][pool2d]") {
  // cifar-cnn's c4 on fewer images (the CPU pools each Winograd output plane as it makes it;
  // CUDA runs the convolution, then the pool), lenet5's c1 (the CPU's direct row layout pools
  // each image's planes) and a 3×3 pool of stride 2 (the two kernels on both devices).
  const std::vector<std::pair<Conv2dGeometry, Pool2dGeometry>> cases = {
      {conv_geometry(4, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1), pool_geometry(4, 64, 16, 16, 2, 2, 2, 2, 0, 0)},
      {conv_geometry(5, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2), pool_geometry(5, 6, 28, 28, 2, 2, 2, 2, 0, 0)},
      {conv_geometry(2, 8, 12, 12, 8, 3, 3, 1, 1, 1, 1), pool_geometry(2, 8, 12, 12, 3, 3, 2, 2, 0, 0)}};
  for (auto [g, pg] : cases) {
    pg.relu = true;
    ConvEpilogue pooled;
    pooled.kind = ConvEpilogue::Kind::ReluMaxPool;
    pooled.pool = pg;
    const Shape ys{pg.n, pg.c, pg.p, pg.q};
    Tensor x = fresh_tensor({g.n, g.c, g.h, g.w}), w = fresh_tensor({g.k, g.c, g.r, g.s}), b = fresh_tensor({g.k});
    Tensor y = Tensor::empty(ys), arg = Tensor::empty(ys, DType::Int32);
    Tensor gy = gpu_empty(ys), garg = gpu_empty(ys, DType::Int32);
    const Tensor gb = on_gpu(b);
    cpu().conv2d_forward(g, pooled, x, w, &b, y, &arg);
    gpu().conv2d_forward(g, pooled, on_gpu(x), on_gpu(w), &gb, gy, &garg);
    require_allclose(gy, y, 1e-5, 1e-6 * static_cast<double>(g.c * g.r * g.s) + 1e-6, "pooled convolution");
    // The winners: the same cell, but for windows whose two best sums the devices' different
    // summation orders may swap (rare with continuous random inputs).
    const std::vector<int32_t> cpu_arg = arg.to_vector<int32_t>(), gpu_arg = garg.to(Device::cpu()).to_vector<int32_t>();
    size_t differ = 0;
    for (size_t i = 0; i < cpu_arg.size(); ++i) differ += cpu_arg[i] != gpu_arg[i];
    CHECK(differ * 1000 <= cpu_arg.size());
    // Backward from the same winners (the CPU's): the CPU routes the pool's dy plane by plane
    // inside its Winograd kernels, CUDA stores dz and runs the convolution's backward.
    const Tensor dy = fresh_tensor(ys);
    Tensor dx = Tensor::empty({g.n, g.c, g.h, g.w}), dw = Tensor::empty({g.k, g.c, g.r, g.s}), db = Tensor::empty({g.k});
    Tensor gdx = gpu_empty(dx.shape()), gdw = gpu_empty(dw.shape()), gdb = gpu_empty(db.shape());
    cpu().conv2d_backward(g, pooled, dy, arg, x, w, dx, dw, db);
    gpu().conv2d_backward(g, pooled, on_gpu(dy), on_gpu(arg), on_gpu(x), on_gpu(w), gdx, gdw, gdb);
    const double sum_atol = 1e-6 * static_cast<double>(g.n * g.p * g.q) + 1e-6;
    require_allclose(gdx, dx, 1e-5, 1e-6 * static_cast<double>(g.k * g.r * g.s) + 1e-6, "pooled convolution's dx");
    require_allclose(gdw, dw, 1e-5, sum_atol, "pooled convolution's dw");
    require_allclose(gdb, db, 1e-5, sum_atol, "pooled convolution's db");
    // A first layer's: no dx (the CPU's direct and Winograd filter gradients route dy alone).
    Tensor no_dx, gpu_no_dx;
    cpu().conv2d_backward(g, pooled, dy, arg, x, w, no_dx, dw, db);
    gpu().conv2d_backward(g, pooled, on_gpu(dy), on_gpu(arg), on_gpu(x), on_gpu(w), gpu_no_dx, gdw, gdb);
    CHECK(!no_dx.defined());
    CHECK(!gpu_no_dx.defined());
    require_allclose(gdw, dw, 1e-5, sum_atol, "first layer's pooled convolution's dw");
    require_allclose(gdb, db, 1e-5, sum_atol, "first layer's pooled convolution's db");
  }
}

// Which kernels a first layer runs on CUDA: nnlab's direct kernels under --conv-impl auto for
// a shallow layer with a ReLU or ReLU + max-pool epilogue (forward, and the filter gradient
// where no dx is wanted), cuDNN under --conv-impl cudnn and for a pool whose windows overlap.
// The values are the same either way (the test above and the op table), so only the log tells.
TEST_CASE("gpu: shallow first layers run the direct kernels under auto and cuDNN's when asked", "[gpu][conv2d]") {
  struct ImplGuard {
    ~ImplGuard() { set_conv_impl(ConvImpl::Auto); }
  } guard;
  const Conv2dGeometry g = conv_geometry(3, 1, 12, 12, 6, 5, 5, 1, 1, 2, 2);  // lenet5's c1 on 12×12
  const auto families = [&](ConvEpilogue e, bool want_dx) {
    const Shape ys = e.kind == ConvEpilogue::Kind::ReluMaxPool ? Shape{g.n, g.k, e.pool.p, e.pool.q}
                                                               : Shape{g.n, g.k, g.p, g.q};
    const Tensor x = on_gpu(fresh_tensor({g.n, g.c, g.h, g.w})), w = on_gpu(fresh_tensor({g.k, g.c, g.r, g.s}));
    const Tensor b = on_gpu(fresh_tensor({g.k}));
    Tensor y = gpu_empty(ys), arg = gpu_empty(ys, DType::Int32);
    Tensor dx = want_dx ? gpu_empty({g.n, g.c, g.h, g.w}) : Tensor(), dw = gpu_empty({g.k, g.c, g.r, g.s});
    Tensor db = gpu_empty({g.k});
    std::vector<std::string> names;
    KernelLogScope log;
    gpu().conv2d_forward(g, e, x, w, &b, y, &arg);
    gpu().conv2d_backward(g, e, on_gpu(fresh_tensor(ys)), e.kind == ConvEpilogue::Kind::ReluMaxPool ? arg : y, x, w,
                          dx, dw, db);
    for (const KernelCall& call : take_kernel_calls()) names.push_back(call.family);
    return names;
  };
  ConvEpilogue relu, pooled, overlapping;
  relu.kind = ConvEpilogue::Kind::Relu;
  pooled.kind = overlapping.kind = ConvEpilogue::Kind::ReluMaxPool;
  pooled.pool = pool_geometry(3, 6, 12, 12, 2, 2, 2, 2, 0, 0);
  overlapping.pool = pool_geometry(3, 6, 12, 12, 3, 3, 2, 2, 0, 0);
  pooled.pool.relu = overlapping.pool.relu = true;
  using Names = std::vector<std::string>;
  CHECK(families(pooled, false) ==
        Names{"direct conv2d fwd + ReLU + max-pool", "direct conv2d bwd filter, through the ReLU + max-pool"});
  CHECK(families(relu, false) == Names{"direct conv2d fwd + ReLU", "direct conv2d bwd filter, through the ReLU"});
  // With dx wanted: the direct forward, then the pool's backward and cuDNN's gradients.
  const Names with_dx = families(pooled, true);
  REQUIRE(!with_dx.empty());
  CHECK(with_dx.front() == "direct conv2d fwd + ReLU + max-pool");
  CHECK(std::count(with_dx.begin(), with_dx.end(), "cudnnConvolutionBackwardFilter") == 1);
  CHECK(std::count(with_dx.begin(), with_dx.end(), "cudnnConvolutionBackwardData") == 1);
  const Names cudnn_overlap = families(overlapping, false);
  CHECK(std::count(cudnn_overlap.begin(), cudnn_overlap.end(), "cudnnConvolutionForward") == 1);
  set_conv_impl(ConvImpl::Cudnn);
  for (const ConvEpilogue& e : {pooled, relu}) {
    const Names named = families(e, false);
    for (const std::string& name : named) CHECK(name.rfind("direct conv2d", 0) == std::string::npos);
    CHECK(std::count(named.begin(), named.end(), "cudnnConvolutionBackwardFilter") == 1);
  }
}

// A convolution with a ReLU epilogue and a bias: on the CUDA side one fused cuDNN call
// (cudnnConvolutionBiasActivationForward) from the second call on (the first finds out whether
// cuDNN runs it with the chosen algorithm; the simulator does), and the CPU's values.
TEST_CASE("gpu: a convolution with its bias and ReLU fused in cuDNN matches the CPU's", "[gpu][conv2d][cudnn]") {
  const Conv2dGeometry g = conv_geometry(3, 8, 10, 10, 16, 3, 3, 1, 1, 1, 1);
  ConvEpilogue relu;
  relu.kind = ConvEpilogue::Kind::Relu;
  const Tensor x = fresh_tensor({g.n, g.c, g.h, g.w}), w = fresh_tensor({g.k, g.c, g.r, g.s}), b = fresh_tensor({g.k});
  const Tensor gx = on_gpu(x), gw = on_gpu(w), gb = on_gpu(b);
  Tensor y = Tensor::empty({g.n, g.k, g.p, g.q}), gy = gpu_empty(y.shape());
  cpu().conv2d_forward(g, relu, x, w, &b, y, nullptr);
  for (int call = 0; call < 2; ++call) {
    std::vector<KernelCall> calls;
    {
      KernelLogScope log;
      gpu().conv2d_forward(g, relu, gx, gw, &gb, gy, nullptr);
      calls = take_kernel_calls();
    }
    require_allclose(gy, y, 1e-5, 1e-6 * static_cast<double>(g.c * g.r * g.s) + 1e-6, "convolution + bias + ReLU");
    if (call == 1 && cuda_simulated()) {
      REQUIRE(calls.size() == 1);
      CHECK(calls[0].family == "cudnnConvolutionBiasActivationForward");
    }
  }
}

TEST_CASE("gpu: batch normalisation, training, evaluation and backward", "[gpu][batchnorm]") {
  // Each channel's statistics are summed in slices of at least 4096 values, at most 64
  // (cuda::channel_slices): one slice; 3 with a shorter last one (64·14·14 = 12,544 values);
  // 2 whose boundary falls inside a plane longer than a block (9·1000); resnet8's first layer
  // (16 slices of 64·32·32); the cap (300,000 values: 64 slices).
  for (const Shape& s : std::vector<Shape>{{2, 1}, {4, 3, 5, 5}, {2, 16, 1, 1}, {64, 32, 14, 14}, {3, 7, 9, 2},
                                           {9, 3, 10, 100}, {64, 16, 32, 32}, {300, 2, 1000}}) {
    const int64_t c = s[1];
    Tensor x = fresh_tensor(s, 2.0, 5.0), gamma = fresh_tensor({c}, 0.5, 1.5), beta = fresh_tensor({c});
    Tensor rm = fresh_tensor({c}), rv = fresh_tensor({c}, 0.5, 1.5);
    Tensor grm = on_gpu(rm), grv = on_gpu(rv);
    Tensor y = Tensor::empty(s), mean = Tensor::empty({c}), invstd = Tensor::empty({c});
    Tensor gy = gpu_empty(s), gmean = gpu_empty({c}), ginvstd = gpu_empty({c});
    cpu().batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1, 1e-5, y, mean, invstd);
    gpu().batchnorm_forward_train(on_gpu(x), on_gpu(gamma), on_gpu(beta), grm, grv, 0.1, 1e-5, gy, gmean, ginvstd);
    require_allclose(gy, y, 1e-5, 1e-5, "batchnorm train y " + shape_str(s));
    require_allclose(gmean, mean, 1e-6, 1e-7, "save_mean");
    require_allclose(ginvstd, invstd, 1e-5, 1e-6, "save_invstd");
    require_allclose(grm, rm, 1e-6, 1e-7, "running_mean");
    require_allclose(grv, rv, 1e-5, 1e-7, "running_var (unbiased)");
    Tensor dy = fresh_tensor(s);
    Tensor dx = Tensor::empty(s), dg = Tensor::empty({c}), db = Tensor::empty({c});
    Tensor gdx = gpu_empty(s), gdg = gpu_empty({c}), gdb = gpu_empty({c});
    cpu().batchnorm_backward(x, dy, gamma, mean, invstd, dx, dg, db);
    gpu().batchnorm_backward(on_gpu(x), on_gpu(dy), on_gpu(gamma), gmean, ginvstd, gdx, gdg, gdb);
    require_allclose(gdx, dx, 1e-4, 1e-5, "batchnorm dx");
    require_allclose(gdg, dg, 1e-4, 1e-5, "batchnorm dgamma");
    require_allclose(gdb, db, 1e-5, 1e-5, "batchnorm dbeta");
    cpu().batchnorm_forward_eval(x, gamma, beta, rm, rv, 1e-5, y);
    gpu().batchnorm_forward_eval(on_gpu(x), on_gpu(gamma), on_gpu(beta), grm, grv, 1e-5, gy);
    require_allclose(gy, y, 1e-5, 1e-5, "batchnorm eval y");
  }
}

TEST_CASE("gpu: Philox words are bit-identical on host and device", "[gpu][philox]") {
  struct Key {
    uint64_t seed;
    uint32_t purpose, stream;
    uint64_t first;
  };
  for (const Key k : {Key{0, 1, 0, 0}, Key{42, 3, 7, 5}, Key{0xdeadbeefcafef00dULL, 2, 123456, 0xfffffff0ULL},
                      Key{~0ULL, 5, ~0u, (1ULL << 40) - 3}}) {
    const int64_t n = 10007;
    Tensor words = gpu_empty({n}, DType::Int32);
    philox_fill_u32_cuda(words, k.seed, k.purpose, k.stream, k.first);
    const std::vector<int32_t> got = words.to_vector<int32_t>();
    size_t differ = 0;
    for (int64_t i = 0; i < n; ++i)
      differ += static_cast<uint32_t>(got[i]) != philox_u32(k.seed, k.purpose, k.stream, k.first + i);
    INFO("seed " << k.seed << " purpose " << k.purpose << " stream " << k.stream << " first " << k.first);
    CHECK(differ == 0);
  }
}

TEST_CASE("gpu: dropout masks are bit-equal to the CPU's", "[gpu][dropout]") {
  for (int64_t n : {1, 3, 4, 5, 1000, 100003}) {
    for (double p : {0.0, 0.1, 0.5, 0.9}) {
      Tensor x = fresh_tensor({n}), dy = fresh_tensor({n});
      Tensor y = Tensor::empty({n}), mask = Tensor::empty({n}, DType::UInt8), dx = Tensor::empty({n});
      Tensor gy = gpu_empty({n}), gmask = gpu_empty({n}, DType::UInt8), gdx = gpu_empty({n});
      const uint64_t seed = next_seed();
      cpu().dropout_forward(x, p, seed, 17, nullptr, y, mask);
      gpu().dropout_forward(on_gpu(x), p, seed, 17, nullptr, gy, gmask);
      const std::string what = "dropout n=" + std::to_string(n) + " p=" + std::to_string(p);
      require_equal<uint8_t>(gmask, mask, what + " mask");
      require_allclose(gy, y, 1e-7, 0, what + " forward");
      cpu().dropout_backward(dy, mask, p, dx);
      gpu().dropout_backward(on_gpu(dy), gmask, p, gdx);
      require_allclose(gdx, dx, 1e-7, 0, what + " backward");
    }
  }
}
