// CUDA kernels against their CPU twins: memory, GEMM, elementwise, reductions,
// softmax-cross-entropy and the fused optimizer steps, on fresh random inputs of several
// shapes (including awkward ones: 1 element, odd sizes, sizes just past a block).
#include "gpu/gpu_support.h"

#include <tuple>

#include "autograd/ops.h"
#include "devices/cuda/cuda_backend.h"

using namespace nnlab;
using namespace nnlab::gputest;

TEST_CASE("gpu: copies, fill, cast and gather_rows match the CPU", "[gpu][memory]") {
  for (int64_t n : {1, 5, 257, 100003}) {
    Tensor x = fresh_tensor({n}, -50, 50);
    Tensor g = on_gpu(x);
    require_equal<float>(g, x, "round trip");
    Tensor gc = Tensor::empty({n}, DType::Float32, Device::cuda(0));
    gpu().copy(g, gc);
    require_equal<float>(gc, x, "device copy");
    require_equal<int32_t>(g.to(DType::Int32), x.to(DType::Int32), "cast float32 → int32");
    require_equal<float>(g.to(DType::Int32).to(DType::Float32), x.to(DType::Int32).to(DType::Float32), "cast back");
    Tensor f = Tensor::full({n}, 3.25, DType::Float32, Device::cuda(0));
    require_equal<float>(f, Tensor::full({n}, 3.25), "fill");
    require_equal<uint8_t>(Tensor::full({n}, 7, DType::UInt8, Device::cuda(0)), Tensor::full({n}, 7, DType::UInt8),
                           "fill uint8");
    require_equal<float>(g.to(DType::BFloat16).to(DType::Float32), x.to(DType::BFloat16).to(DType::Float32),
                         "cast float32 → bfloat16 → float32");
    require_equal<float>(Tensor::full({n}, 0.1, DType::BFloat16, Device::cuda(0)).to(DType::Float32),
                         Tensor::full({n}, 0.1, DType::BFloat16).to(DType::Float32), "fill bfloat16");
  }
  // bf16's rounding decisions on the device, bit for bit as the CPU's (core/bfloat16.h): past
  // half an ulp, two ties (to even), a denormal, an overflow; truncating would miss three.
  const Tensor edges = Tensor::from_vector<float>(
      {1.0f + 0x1p-8f + 0x1p-10f, 1.0f + 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-8f, 0x1p-130f, 3.4e38f, -0.0f}, {6});
  require_equal<float>(on_gpu(edges).to(DType::BFloat16).to(DType::Float32),
                       edges.to(DType::BFloat16).to(DType::Float32), "bfloat16 rounding");
  CHECK(on_gpu(edges).to(DType::BFloat16).to(DType::Float32).to_vector<float>() ==
        std::vector<float>{1.0f + 0x1p-7f, 1.0f, 1.0f + 0x1p-6f, 0x1p-130f, INFINITY, -0.0f});
  for (const Shape& rows_shape : std::vector<Shape>{{10, 3}, {7, 1, 5, 5}, {1, 1}}) {
    Tensor rows = fresh_tensor(rows_shape);
    Tensor idx = random_labels(13, rows_shape[0]);
    Shape out_shape = rows_shape;
    out_shape[0] = 13;
    Tensor want = Tensor::empty(out_shape), got = Tensor::empty(out_shape, DType::Float32, Device::cuda(0));
    cpu().gather_rows(rows, idx, want);
    gpu().gather_rows(on_gpu(rows), on_gpu(idx), got);
    require_equal<float>(got, want, "gather_rows float32");
  }
  // uint8 rows of an odd size take the byte path.
  Tensor pix = fresh_tensor({6, 3, 3}, 0, 255).to(DType::UInt8);
  Tensor idx = random_labels(9, 6);
  Tensor want = Tensor::empty({9, 3, 3}, DType::UInt8), got = Tensor::empty({9, 3, 3}, DType::UInt8, Device::cuda(0));
  cpu().gather_rows(pix, idx, want);
  gpu().gather_rows(on_gpu(pix), on_gpu(idx), got);
  require_equal<uint8_t>(got, want, "gather_rows uint8");
  // A bad index is reported at the next read-back, as an Error, not a crash.
  Tensor bad = on_gpu(Tensor::from_vector<int32_t>({0, 6}, {2}));
  Tensor out = Tensor::empty({2, 3, 3}, DType::UInt8, Device::cuda(0));
  gpu().gather_rows(on_gpu(pix), bad, out);
  CHECK_THROWS_WITH(out.to_vector<uint8_t>(), Catch::Contains("gather_rows or gather_images): index 6"));
}

TEST_CASE("gpu: gemm matches OpenBLAS for every transpose combination", "[gpu][gemm]") {
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims d : {Dims{1, 1, 1}, Dims{7, 13, 5}, Dims{64, 10, 784}, Dims{129, 257, 65}, Dims{3, 300, 1}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      Tensor a = fresh_tensor(ta ? Shape{d.k, d.m} : Shape{d.m, d.k});
      Tensor b = fresh_tensor(tb ? Shape{d.n, d.k} : Shape{d.k, d.n});
      Tensor c = fresh_tensor({d.m, d.n});
      Tensor gc = on_gpu(c);
      cpu().gemm(ta, tb, d.m, d.n, d.k, 1.5, a, b, 0.5, c);
      gpu().gemm(ta, tb, d.m, d.n, d.k, 1.5, on_gpu(a), on_gpu(b), 0.5, gc);
      require_allclose(gc, c, 1e-5, 2e-6 * static_cast<double>(d.k) + 1e-6,
                    "gemm " + std::to_string(d.m) + "×" + std::to_string(d.n) + "×" + std::to_string(d.k) +
                        " trans " + std::to_string(t));
    }
  }
}

TEST_CASE("gpu: gemm on bf16 storage matches the CPU's, into float32 and into bf16", "[gpu][gemm][bfloat16]") {
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims d : {Dims{1, 1, 1}, Dims{7, 13, 5}, Dims{64, 10, 784}, Dims{33, 65, 0}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const Tensor a = fresh_tensor(ta ? Shape{d.k, d.m} : Shape{d.m, d.k}).to(DType::BFloat16);
      const Tensor b = fresh_tensor(tb ? Shape{d.n, d.k} : Shape{d.k, d.n}).to(DType::BFloat16);
      for (const DType c_type : {DType::Float32, DType::BFloat16}) {
        Tensor c = fresh_tensor({d.m, d.n}).to(c_type), gc = on_gpu(c);
        cpu().gemm(ta, tb, d.m, d.n, d.k, 1.5, a, b, 0.5, c);
        gpu().gemm(ta, tb, d.m, d.n, d.k, 1.5, on_gpu(a), on_gpu(b), 0.5, gc);
        REQUIRE(gc.dtype() == c_type);
        // Sums in another order: float32 apart by their rounding; a bf16 C by at most one of
        // its ulps (2⁻⁷ relative) where the two sums straddle a rounding boundary.
        const double rtol = c_type == DType::BFloat16 ? 1e-2 : 1e-5;
        require_allclose(gc, c, rtol, 2e-6 * static_cast<double>(d.k) + 1e-6,
                         "bf16 gemm " + std::to_string(d.m) + "×" + std::to_string(d.n) + "×" +
                             std::to_string(d.k) + " trans " + std::to_string(t) + " into " + dtype_name(c_type));
      }
    }
  }
  Tensor a = on_gpu(fresh_tensor({4, 4})).to(DType::BFloat16), c = on_gpu(Tensor::zeros({4, 4}));
  CHECK_THROWS_WITH(gpu().gemm(false, false, 4, 4, 4, 1.0, a, on_gpu(fresh_tensor({4, 4})), 0.0, c),
                    Catch::Contains("gemm: dtypes differ") && Catch::Contains("bf16 A and B"));
}

TEST_CASE("gpu: TF32 is opt-in and strict float32 is the default", "[gpu][gemm]") {
  REQUIRE_FALSE(cuda_math_tf32());
  Tensor a = fresh_tensor({96, 512}), b = fresh_tensor({512, 96});
  Tensor c = Tensor::zeros({96, 96}), strict = on_gpu(c), tf32 = on_gpu(c);
  cpu().gemm(false, false, 96, 96, 512, 1.0, a, b, 0.0, c);
  gpu().gemm(false, false, 96, 96, 512, 1.0, on_gpu(a), on_gpu(b), 0.0, strict);
  set_cuda_math_mode(static_cast<int>(CudaMath::Tf32));
  gpu().gemm(false, false, 96, 96, 512, 1.0, on_gpu(a), on_gpu(b), 0.0, tf32);
  set_cuda_math_mode(static_cast<int>(CudaMath::Fp32));
  require_allclose(strict, c, 1e-5, 1e-4, "strict float32 gemm");
  require_allclose(tf32, c, 1e-2, 5e-2, "tf32 gemm (10-bit mantissa inputs)");
}

TEST_CASE("gpu: binary ops with broadcasting, forward and backward", "[gpu][elementwise]") {
  struct Case {
    Shape a, b;
  };
  for (const Case& cs : {Case{{1}, {1}}, Case{{5, 7}, {5, 7}}, Case{{33, 10}, {10}}, Case{{4}, {3, 5, 4}},
                         Case{{1000, 3}, {1}}}) {
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div}) {
      Tensor a = fresh_tensor(cs.a, 0.5, 2.0), b = fresh_tensor(cs.b, 0.5, 2.0);
      const Shape ys = shape_numel(cs.a) >= shape_numel(cs.b) ? cs.a : cs.b;
      const std::string what = std::string(binary_op_name(op)) + " " + shape_str(cs.a) + " with " + shape_str(cs.b);
      Tensor y = Tensor::empty(ys), gy = Tensor::empty(ys, DType::Float32, Device::cuda(0));
      cpu().binary_forward(op, a, b, y);
      gpu().binary_forward(op, on_gpu(a), on_gpu(b), gy);
      require_allclose(gy, y, 1e-6, 1e-7, what + " forward");
      Tensor dy = fresh_tensor(ys);
      Tensor da = Tensor::empty(cs.a), db = Tensor::empty(cs.b);
      Tensor gda = Tensor::empty(cs.a, DType::Float32, Device::cuda(0)), gdb = Tensor::empty(cs.b, DType::Float32, Device::cuda(0));
      cpu().binary_backward(op, a, b, dy, &da, &db);
      gpu().binary_backward(op, on_gpu(a), on_gpu(b), on_gpu(dy), &gda, &gdb);
      require_allclose(gda, da, 1e-5, 1e-5, what + " da");
      require_allclose(gdb, db, 1e-5, 1e-5, what + " db");
    }
  }
}

TEST_CASE("gpu: activations and axpby", "[gpu][elementwise]") {
  for (int64_t n : {1, 255, 257, 65537}) {
    Tensor x = fresh_tensor({n}, -6, 6), dy = fresh_tensor({n});
    for (UnaryOp op : {UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh}) {
      Tensor y = Tensor::empty({n}), dx = Tensor::empty({n});
      Tensor gx = on_gpu(x), gy = Tensor::empty({n}, DType::Float32, Device::cuda(0)), gdx = gy.clone();
      cpu().unary_forward(op, x, y);
      gpu().unary_forward(op, gx, gy);
      require_allclose(gy, y, 2e-6, 1e-7, std::string(unary_op_name(op)) + " forward");
      // Both backwards from the CPU's y: the GPU's tanh may differ from it in the last bit, which
      // 1 − y² near |y| = 1 would magnify far beyond the backward kernel's own rounding.
      cpu().unary_backward(op, x, y, dy, dx);
      gpu().unary_backward(op, gx, on_gpu(y), on_gpu(dy), gdx);
      require_allclose(gdx, dx, 1e-5, 1e-7, std::string(unary_op_name(op)) + " backward");
    }
    Tensor y = fresh_tensor({n}), gy = on_gpu(y);
    cpu().axpby(0.75, x, -1.25, y);
    gpu().axpby(0.75, on_gpu(x), -1.25, gy);
    require_allclose(gy, y, 1e-6, 1e-6, "axpby");
    Tensor nan = Tensor::full({n}, NAN), gnan = on_gpu(nan);
    gpu().axpby(2.0, on_gpu(x), 0.0, gnan);  // beta = 0 overwrites NaN
    cpu().axpby(2.0, x, 0.0, nan);
    require_allclose(gnan, nan, 0, 0, "axpby beta = 0 over NaN");
  }
}

TEST_CASE("gpu: bias add, bias gradient and full sums", "[gpu][reduce]") {
  struct Case {
    int64_t outer, c, inner;
  };
  // The bias gradient sums each channel in slices of at least 4096 values (at most 64): one
  // slice; several, with a last one shorter (cnn's c1: 12 slices of 4182), rows longer than a
  // block, and one value per row (a Linear layer's bias).
  for (const Case cs : {Case{1, 1, 1}, Case{64, 10, 1}, Case{3, 7, 29}, Case{32, 64, 196}, Case{64, 32, 784},
                        Case{5, 3, 10007}, Case{9000, 2, 1}, Case{300, 1, 1000}}) {
    Tensor y = fresh_tensor({cs.outer, cs.c, cs.inner}), b = fresh_tensor({cs.c});
    Tensor gy = on_gpu(y);
    cpu().bias_forward(y, b, cs.inner);
    gpu().bias_forward(gy, on_gpu(b), cs.inner);
    require_allclose(gy, y, 1e-6, 1e-7, "bias_forward");
    Tensor db = Tensor::empty({cs.c}), gdb = Tensor::empty({cs.c}, DType::Float32, Device::cuda(0));
    cpu().bias_backward(y, db, cs.inner);
    gpu().bias_backward(gy, gdb, cs.inner);
    require_allclose(gdb, db, 1e-5, 1e-5, "bias_backward");
    // The ReLU's backward fused with it: the CPU's dz, and on the GPU the unfused kernel's bits.
    const Tensor act = fresh_tensor({cs.outer, cs.c, cs.inner});
    Tensor dz = Tensor::empty(y.shape()), gdz = Tensor::empty(y.shape(), DType::Float32, Device::cuda(0));
    Tensor fused_db = Tensor::empty({cs.c}, DType::Float32, Device::cuda(0)), apart_db = fused_db.clone();
    cpu().relu_bias_backward(act, y, dz, &db, cs.inner);
    gpu().relu_bias_backward(on_gpu(act), gy, gdz, &fused_db, cs.inner);
    require_equal<float>(gdz, dz, "relu_bias_backward dz");
    require_allclose(fused_db, db, 1e-5, 1e-5, "relu_bias_backward db");
    gpu().bias_backward(gdz, apart_db, cs.inner);
    require_equal<float>(fused_db, apart_db, "fused against unfused bias gradient");
  }
  for (int64_t n : {1, 1000, 1 << 20}) {
    Tensor x = fresh_tensor({n});
    for (DType out_type : {DType::Float32, DType::Float64}) {
      Tensor s = Tensor::empty({}, out_type), gs = Tensor::empty({}, out_type, Device::cuda(0));
      cpu().sum_all(x, 0.5, s);
      gpu().sum_all(on_gpu(x), 0.5, gs);
      require_allclose(gs, s, 1e-6, 1e-6, "sum_all");
      cpu().sum_squares(x, s);
      gpu().sum_squares(on_gpu(x), gs);
      require_allclose(gs, s, 1e-6, 1e-6, "sum_squares");
    }
  }
}

TEST_CASE("gpu: log-softmax and softmax cross-entropy, forward and backward", "[gpu][softmax_xent]") {
  for (const Shape& s : std::vector<Shape>{{1, 1}, {1, 10}, {64, 10}, {257, 3}, {5, 1000}}) {
    const int64_t n = s[0], c = s[1];
    Tensor x = fresh_tensor(s, -20, 20), dy = fresh_tensor(s);
    Tensor y = Tensor::empty(s), dx = Tensor::empty(s);
    Tensor gy = Tensor::empty(s, DType::Float32, Device::cuda(0)), gdx = gy.clone();
    cpu().log_softmax_forward(x, y);
    gpu().log_softmax_forward(on_gpu(x), gy);
    require_allclose(gy, y, 1e-5, 1e-5, "log_softmax forward " + shape_str(s));
    cpu().log_softmax_backward(y, dy, dx);
    gpu().log_softmax_backward(gy, on_gpu(dy), gdx);
    require_allclose(gdx, dx, 1e-5, 1e-5, "log_softmax backward " + shape_str(s));

    Tensor labels = random_labels(n, c);
    Tensor probs = Tensor::empty(s), loss = Tensor::empty({}), gprobs = gy.clone();
    Tensor gloss = Tensor::empty({}, DType::Float32, Device::cuda(0));
    Tensor flag = make_nonfinite_flag(Device::cuda(0));
    cpu().softmax_xent_forward(x, labels, probs, loss, nullptr, {});
    gpu().softmax_xent_forward(on_gpu(x), on_gpu(labels), gprobs, gloss, &flag, {1, 0});
    require_allclose(gprobs, probs, 1e-5, 1e-7, "softmax probabilities " + shape_str(s));
    require_allclose(gloss, loss, 1e-5, 1e-6, "cross-entropy loss " + shape_str(s));
    CHECK(read_nonfinite_flag(flag).step == 0);
    Tensor dloss = Tensor::full({}, 1.5);
    cpu().softmax_xent_backward(probs, labels, dloss, dx);
    gpu().softmax_xent_backward(gprobs, on_gpu(labels), on_gpu(dloss), gdx);
    require_allclose(gdx, dx, 1e-5, 1e-7, "cross-entropy backward " + shape_str(s));

    Tensor correct = Tensor::full({}, 3, DType::Int32), gcorrect = on_gpu(correct);
    cpu().count_correct(x, labels, correct);
    gpu().count_correct(on_gpu(x), on_gpu(labels), gcorrect);
    require_equal<int32_t>(gcorrect, correct, "count_correct");
  }
}

TEST_CASE("gpu: non-finite values and bad labels raise flags, not traps", "[gpu][softmax_xent]") {
  Tensor x = fresh_tensor({100000});
  Tensor flag = make_nonfinite_flag(Device::cuda(0));
  gpu().check_finite(on_gpu(x), flag, {3, 1});
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{0, 0});
  // Many bad elements in one launch: one thread wins and the mark is whole, not mixed.
  std::vector<float> v = x.to_vector<float>();
  for (size_t i = 50000; i < v.size(); i += 7) v[i] = i % 2 ? INFINITY : NAN;
  gpu().check_finite(on_gpu(Tensor::from_vector(v, {100000})), flag, {4, 2});
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{4, 2});
  gpu().check_finite(on_gpu(Tensor::from_vector(v, {100000})), flag, {5, 3});
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{4, 2});  // the first fault stays

  Tensor logits = on_gpu(fresh_tensor({4, 10})), probs = logits.clone();
  Tensor loss = Tensor::empty({}, DType::Float32, Device::cuda(0));
  Tensor nonfinite = make_nonfinite_flag(Device::cuda(0));
  gpu().softmax_xent_forward(logits, on_gpu(Tensor::from_vector<int32_t>({1, 2, 10, 3}, {4})), probs, loss,
                             &nonfinite, {9, 0});
  CHECK_THROWS_WITH(loss.item(), Catch::Contains("label 10 of sample 2") && Catch::Contains("10 classes"));
  // The fault was raised once, with the step's mark; the flag stays for the training loop.
  CHECK(nonfinite.to_vector<int32_t>() == std::vector<int32_t>{9, 0});
}

TEST_CASE("gpu: fused SGD and Adam/AdamW steps match the CPU", "[gpu][optim]") {
  const std::vector<SgdParams> sgds = {{0.1, 0.0, 0.0, 0.0, false},
                                       {0.05, 0.9, 0.0, 1e-4, false},
                                       {0.05, 0.9, 0.0, 0.0, true},
                                       {0.02, 0.8, 0.3, 1e-2, false}};
  for (int64_t n : {1, 1023, 70000}) {
    for (const SgdParams& hp : sgds) {
      Tensor p = fresh_tensor({n}), buf = Tensor::zeros({n});
      Tensor gp = on_gpu(p), gbuf = on_gpu(buf);
      Tensor none;
      Tensor& cbuf = hp.momentum != 0 ? buf : none;
      Tensor& cgbuf = hp.momentum != 0 ? gbuf : none;
      for (int step = 0; step < 3; ++step) {
        Tensor g = fresh_tensor({n});
        cpu().sgd_step(p, g, cbuf, hp, step == 0, nullptr);
        gpu().sgd_step(gp, on_gpu(g), cgbuf, hp, step == 0, nullptr);
      }
      require_allclose(gp, p, 1e-5, 1e-6, "sgd momentum " + std::to_string(hp.momentum));
    }
    for (const AdamParams& hp : {AdamParams{1e-3, 0.9, 0.999, 1e-8, 0.0, false},
                                 AdamParams{1e-2, 0.8, 0.99, 1e-6, 0.1, false},
                                 AdamParams{1e-2, 0.9, 0.999, 1e-8, 0.1, true}}) {
      Tensor p = fresh_tensor({n}), m = Tensor::zeros({n}), v = Tensor::zeros({n});
      Tensor gp = on_gpu(p), gm = on_gpu(m), gv = on_gpu(v);
      for (int64_t step = 1; step <= 3; ++step) {
        Tensor g = fresh_tensor({n});
        cpu().adam_step(p, g, m, v, hp, step, nullptr);
        gpu().adam_step(gp, on_gpu(g), gm, gv, hp, step, nullptr);
      }
      require_allclose(gp, p, 1e-5, 1e-6, hp.decoupled_weight_decay ? "adamw param" : "adam param");
      require_allclose(gm, m, 1e-5, 1e-7, "adam exp_avg");
      require_allclose(gv, v, 1e-5, 1e-9, "adam exp_avg_sq");
    }
  }
}

TEST_CASE("gpu: a raised skip flag stops the optimizer on the device", "[gpu][optim]") {
  Tensor p = fresh_tensor({500}), g = fresh_tensor({500});
  Tensor gp = on_gpu(p), buf = Tensor::zeros({500}, DType::Float32, Device::cuda(0));
  Tensor m = buf.clone(), v = buf.clone();
  Tensor skip = Tensor::from_vector<int32_t>({3, 1}, {2}).to(Device::cuda(0));  // raised at step 3
  gpu().sgd_step(gp, on_gpu(g), buf, {0.1, 0.9, 0.0, 0.0, false}, true, &skip);
  gpu().adam_step(gp, on_gpu(g), m, v, {1e-3, 0.9, 0.999, 1e-8, 0.0, false}, 1, &skip);
  require_equal<float>(gp, p, "parameters under a raised skip flag");
  skip.fill_(0);
  gpu().sgd_step(gp, on_gpu(g), buf, {0.1, 0.9, 0.0, 0.0, false}, true, &skip);
  CHECK(gp.to_vector<float>() != p.to_vector<float>());
}

// The loader's batch built on the device from a data set held as stored: CPU and CUDA twins
// bit for bit, for bytes and floats, with and without crops and flips (every offset, those
// that leave the image included) and a normalisation.
TEST_CASE("gpu: gather_images matches the CPU", "[gpu][memory]") {
  std::vector<uint8_t> pixels(5 * 3 * 6 * 7);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  const Tensor bytes = Tensor::from_vector(pixels, {5, 3, 6, 7});
  const Tensor floats = fresh_tensor({5, 3, 6, 7}, 0.0, 1.0);
  const Tensor idx = Tensor::from_vector(std::vector<int32_t>{4, 0, 2, 2, 1}, {5});
  const Tensor shifts =
      Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 2, -3, 1, -6, 0, 0, 1, 7, 1, -1, 1, 0}, {5, 3});
  const Tensor mean_std = Tensor::from_vector(std::vector<float>{0.5f, 0.25f, -1.0f, 0.2f, 2.0f, 0.75f}, {2, 3});
  for (const Tensor& rows : {bytes, floats})
    for (const Tensor& sh : {Tensor(), shifts})
      for (const Tensor& ms : {Tensor(), mean_std}) {
        INFO(rows.describe() << (sh.defined() ? ", cropped and flipped" : "") << (ms.defined() ? ", normalised" : ""));
        Tensor want = Tensor::empty({5, 3, 6, 7}), got = on_gpu(Tensor::empty({5, 3, 6, 7}));
        cpu().gather_images(rows, idx, sh, ms, want);
        gpu().gather_images(on_gpu(rows), on_gpu(idx), sh.defined() ? on_gpu(sh) : Tensor(),
                            ms.defined() ? on_gpu(ms) : Tensor(), got);
        require_equal<float>(got, want, "gather_images");
      }
  // Sample 2 is all padding (dy = −6 on 6 rows): zero, normalised as a pixel is.
  Tensor padded = Tensor::empty({5, 3, 6, 7});
  cpu().gather_images(bytes, idx, shifts, mean_std, padded);
  const std::vector<float> w = padded.to_vector<float>();
  CHECK(w[2 * 126] == (0.0f - 0.5f) / 0.2f);
  CHECK(w[2 * 126 + 42] == (0.0f - 0.25f) / 2.0f);
  Tensor bad = on_gpu(Tensor::empty({5, 3, 6, 7}));
  CHECK_THROWS_WITH(gpu().gather_images(on_gpu(bytes), on_gpu(idx), Tensor(), on_gpu(shifts), bad),
                    Catch::Contains("the normalisation must be float32 (2, 3)"));
}

// SGD checking its gradients as it steps (sgd_step_all with check_grad; CUDA: one finiteness
// check over the list, then one step launch for the list, which reads the flag on the device):
// finite, the CPU's values; a NaN in the second gradient raises its mark and moves nothing.
TEST_CASE("gpu: SGD's checked step matches the CPU and skips on a bad gradient", "[gpu][optim]") {
  const SgdParams hp{0.05, 0.9, 0.0, 1e-4, false};
  Tensor p1 = fresh_tensor({70000}), p2 = fresh_tensor({33}), m1 = Tensor::zeros({70000}), m2 = Tensor::zeros({33});
  Tensor gp1 = on_gpu(p1), gp2 = on_gpu(p2), gm1 = on_gpu(m1), gm2 = on_gpu(m2);
  Tensor flag = Tensor::zeros({2}, DType::Int32), gflag = on_gpu(flag);
  for (int step = 0; step < 2; ++step) {
    const Tensor g1 = fresh_tensor({70000}), g2 = fresh_tensor({33});
    const Tensor gg1 = on_gpu(g1), gg2 = on_gpu(g2);
    cpu().sgd_step_all({{&p1, &g1, &m1, step == 0, true, {1, 1}}, {&p2, &g2, &m2, step == 0, true, {1, 2}}}, hp, &flag);
    gpu().sgd_step_all({{&gp1, &gg1, &gm1, step == 0, true, {1, 1}}, {&gp2, &gg2, &gm2, step == 0, true, {1, 2}}}, hp,
                       &gflag);
  }
  require_allclose(gp1, p1, 1e-5, 1e-6, "checked sgd, first parameter");
  require_allclose(gp2, p2, 1e-5, 1e-6, "checked sgd, second parameter");
  require_equal<int32_t>(gflag, flag, "flag after finite steps");
  Tensor g1 = fresh_tensor({70000}), g2 = fresh_tensor({33});
  g2.data<float>()[5] = std::nanf("");
  const Tensor gg1 = on_gpu(g1), gg2 = on_gpu(g2), before = gp1.to(Device::cpu());
  gpu().sgd_step_all({{&gp1, &gg1, &gm1, false, true, {7, 1}}, {&gp2, &gg2, &gm2, false, true, {7, 2}}}, hp, &gflag);
  CHECK(gflag.to_vector<int32_t>() == std::vector<int32_t>{7, 2});
  require_equal<float>(gp1, before, "parameters after a bad gradient");
}

// Adam over a list of parameters (CUDA: one launch), each with its own step count: the CPU's
// one-by-one values.
TEST_CASE("gpu: Adam over a list matches the CPU parameter by parameter", "[gpu][optim]") {
  const AdamParams hp{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
  std::vector<Tensor> p, m, v, gp, gm, gv;
  for (int64_t n : {70000, 33, 1}) {
    p.push_back(fresh_tensor({n}));
    m.push_back(Tensor::zeros({n}));
    v.push_back(Tensor::zeros({n}));
    gp.push_back(on_gpu(p.back()));
    gm.push_back(on_gpu(m.back()));
    gv.push_back(on_gpu(v.back()));
  }
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<Tensor> g, gg;
    std::vector<AdamSlot> slots;
    for (size_t i = 0; i < p.size(); ++i) {
      g.push_back(fresh_tensor(p[i].shape()));
      gg.push_back(on_gpu(g.back()));
      cpu().adam_step(p[i], g[i], m[i], v[i], hp, step + static_cast<int64_t>(i), nullptr);
    }
    for (size_t i = 0; i < p.size(); ++i) slots.push_back({&gp[i], &gg[i], &gm[i], &gv[i], step + static_cast<int64_t>(i)});
    gpu().adam_step_all(slots, hp, nullptr);
  }
  for (size_t i = 0; i < p.size(); ++i) {
    require_allclose(gp[i], p[i], 1e-5, 1e-6, "adam_step_all param");
    require_allclose(gv[i], v[i], 1e-5, 1e-9, "adam_step_all exp_avg_sq");
  }
}

// Several bad tensors in one list: the mark is the first one's in list order, whichever
// thread found its NaN first (a large first tensor, its NaN near the end).
TEST_CASE("gpu: a list's finiteness check names the first bad tensor in list order", "[gpu][optim]") {
  Tensor a = fresh_tensor({200000}), b = fresh_tensor({10}), c = fresh_tensor({10});
  a.data<float>()[199999] = std::nanf("");
  c.data<float>()[0] = INFINITY;
  Tensor flag = on_gpu(Tensor::zeros({2}, DType::Int32));
  gpu().check_finite_all({on_gpu(a), on_gpu(b), on_gpu(c)}, flag, {{3, 1}, {3, 2}, {3, 3}}, nullptr);
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{3, 1});
  gpu().check_finite_all({on_gpu(c)}, flag, {{4, 9}}, nullptr);  // raised already: stays
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{3, 1});
  Tensor clear = on_gpu(Tensor::zeros({2}, DType::Int32));
  gpu().check_finite_all({on_gpu(b), on_gpu(c)}, clear, {{5, 1}, {5, 2}}, nullptr);
  CHECK(clear.to_vector<int32_t>() == std::vector<int32_t>{5, 2});
}

// A Linear layer's two backward products in one call: the CPU's paired products against CUDA's
// two gemm calls.
TEST_CASE("gpu: Linear's backward products match the CPU", "[gpu][gemm]") {
  for (const auto& [n, out, in] : {std::tuple<int64_t, int64_t, int64_t>{64, 128, 256}, {37, 29, 301}}) {
    const Tensor dz = fresh_tensor({n, out}), x = fresh_tensor({n, in}), w = fresh_tensor({out, in});
    Tensor dx = Tensor::empty({n, in}), dw = Tensor::empty({out, in});
    Tensor gdx = on_gpu(dx), gdw = on_gpu(dw);
    cpu().linear_products(dz, x, w, &dx, &dw);
    gpu().linear_products(on_gpu(dz), on_gpu(x), on_gpu(w), &gdx, &gdw);
    require_allclose(gdx, dx, 1e-5, 1e-6 * double(out) + 1e-6, "linear input gradient");
    require_allclose(gdw, dw, 1e-5, 1e-6 * double(n) + 1e-6, "linear weight gradient");
  }
}
