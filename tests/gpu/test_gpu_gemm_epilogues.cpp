// A Linear layer's bias, ReLU and bias gradient folded into cuBLASLt epilogues
// (devices/cuda/gemm_lt.h): the results match the CPU twin's, the kernel log shows one call
// where the plain path makes two or three, the teaching ladders still get their own kernels,
// and, on the simulator, cuBLASLt refuses what its documentation calls wrong. Then --math
// bf16: cuBLAS and cuBLASLt's products take their inputs rounded to bf16, to nearest even.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "devices/cuda/cuda_backend.h"
#include "devices/kernel_log.h"
#include "devices/reduce_impl.h"
#include "gpu/gpu_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

std::vector<std::string> families(const std::vector<KernelCall>& calls) {
  std::vector<std::string> f;
  for (const KernelCall& c : calls) f.push_back(c.family);
  return f;
}

// A Linear layer's forward and whole backward on both backends, compared; returns the CUDA
// calls of forward and backward as the kernel log names them.
std::pair<std::vector<std::string>, std::vector<std::string>> linear_both_ways(int64_t n, int64_t in, int64_t out,
                                                                               bool relu) {
  const Tensor x = fresh_tensor({n, in}), w = fresh_tensor({out, in}), b = fresh_tensor({out});
  const Tensor dy = fresh_tensor({n, out});
  const Tensor gx = on_gpu(x), gw = on_gpu(w), gb = on_gpu(b), gdy = on_gpu(dy);
  Tensor y = Tensor::empty({n, out}), gy = on_gpu(y);
  Tensor dx = Tensor::empty({n, in}), dw = Tensor::empty({out, in}), db = Tensor::empty({out});
  Tensor gdx = on_gpu(dx), gdw = on_gpu(dw), gdb = on_gpu(db);
  cpu().linear_forward(x, w, &b, y, relu);
  cpu().linear_backward(dy, relu ? &y : nullptr, x, w, &dx, &dw, &db);
  std::vector<KernelCall> forward, backward;
  {
    KernelLogScope log;
    gpu().linear_forward(gx, gw, &gb, gy, relu);
    forward = take_kernel_calls();
    gpu().linear_backward(gdy, relu ? &gy : nullptr, gx, gw, &gdx, &gdw, &gdb);
    backward = take_kernel_calls();
  }
  const std::string what = std::to_string(n) + "×" + std::to_string(in) + "→" + std::to_string(out) +
                           (relu ? " with ReLU" : "");
  require_allclose(gy, y, 1e-5, 1e-6 * double(in) + 1e-6, "linear forward " + what);
  require_allclose(gdx, dx, 1e-5, 1e-6 * double(out) + 1e-6, "linear input gradient " + what);
  require_allclose(gdw, dw, 1e-5, 1e-6 * double(n) + 1e-6, "linear weight gradient " + what);
  require_allclose(gdb, db, 1e-5, 1e-6 * double(n) + 1e-6, "linear bias gradient " + what);
  return {families(forward), families(backward)};
}

}  // namespace

TEST_CASE("gpu: a Linear's bias, ReLU and bias gradient run as cuBLASLt epilogues and match the CPU",
          "[gpu][gemm][epilogue]") {
  for (const auto& [n, in, out] : {std::tuple<int64_t, int64_t, int64_t>{64, 3136, 128}, {37, 301, 29}, {1, 5, 3}})
    for (bool relu : {false, true}) {
      const auto [forward, backward] = linear_both_ways(n, in, out, relu);
      INFO("forward: " << forward.size() << " calls, backward: " << backward.size());
      if (!cuda_simulated()) continue;  // a GPU's cuBLASLt may lack an algorithm: then the plain path ran
      // forward: one call, the bias and the ReLU inside it
      CHECK(forward == std::vector<std::string>{relu ? "cublasLtMatmul (bias+relu)" : "cublasLtMatmul (bias)"});
      // backward: the ReLU's mask, then dW with db as its epilogue, then dx
      std::vector<std::string> want{"cublasLtMatmul (bias gradient)", "cublasSgemm"};
      if (relu) want.insert(want.begin(), "unary_backward relu");
      CHECK(backward == want);
    }
}

TEST_CASE("gpu: the GEMM and reduction ladders bypass the epilogues", "[gpu][gemm][epilogue][gemm_ladder]") {
  {
    GemmImplScope scope(GemmImpl::Tiled);
    const auto [forward, backward] = linear_both_ways(8, 24, 16, true);
    CHECK(forward == std::vector<std::string>{"gemm tiled", "bias_forward", "unary_forward relu"});
    CHECK(backward == std::vector<std::string>{"relu_bias_backward", "gemm tiled", "gemm tiled"});
  }
  // --reduce-impl is CUDA's alone (the CPU refuses it), so only the CUDA side runs here
  const Tensor x = on_gpu(fresh_tensor({8, 24})), w = on_gpu(fresh_tensor({16, 24})), dy = on_gpu(fresh_tensor({8, 16}));
  Tensor dx = on_gpu(Tensor::empty({8, 24})), dw = on_gpu(Tensor::empty({16, 24})), db = on_gpu(Tensor::empty({16}));
  std::vector<KernelCall> calls;
  set_reduce_impl(ReduceImpl::Tree);
  {
    KernelLogScope log;
    gpu().linear_backward(dy, nullptr, x, w, &dx, &dw, &db);
    calls = take_kernel_calls();
  }
  set_reduce_impl(ReduceImpl::Auto);
  CHECK(families(calls) == std::vector<std::string>{"bias_backward_tree_kernel", "cublasSgemm", "cublasSgemm"});
}

// The simulator's cuBLASLt (devices/cuda/sim/sim_cublaslt.cpp) answers misuse with the
// documented status and a diagnostic, where a GPU might compute garbage or fault later.
TEST_CASE("gpu: the simulated cuBLASLt refuses a missing bias, a foreign algorithm and host memory",
          "[gpu][gemm][epilogue][simulator]") {
  if (!cuda_simulated()) return;
  cublasLtHandle_t h = nullptr;
  REQUIRE(cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, wide = nullptr;
  REQUIRE(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 4, 3, 4) == CUBLAS_STATUS_SUCCESS);   // A: 4×3
  REQUIRE(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 3, 2, 3) == CUBLAS_STATUS_SUCCESS);   // B: 3×2
  REQUIRE(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, 4, 2, 4) == CUBLAS_STATUS_SUCCESS);   // D: 4×2
  REQUIRE(cublasLtMatrixLayoutCreate(&wide, CUDA_R_32F, 4, 5, 4) == CUBLAS_STATUS_SUCCESS);  // 4×5: k differs
  cublasLtMatmulPreference_t pref = nullptr;
  REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
  const uint32_t bias_epilogue = CUBLASLT_EPILOGUE_BIAS;
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias_epilogue, sizeof(bias_epilogue)) ==
          CUBLAS_STATUS_SUCCESS);
  // a wrong attribute size is refused
  const uint64_t too_wide = CUBLASLT_EPILOGUE_BIAS;
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &too_wide, sizeof(too_wide)) ==
        CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  REQUIRE(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, 1, &result, &found) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(found == 1);
  // op(A)'s 3 columns against a B of 4 rows: no such product
  CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, wide, b, c, c, pref, 1, &result, &found) == CUBLAS_STATUS_INVALID_VALUE);

  const Tensor ta = on_gpu(fresh_tensor({12})), tb = on_gpu(fresh_tensor({6})), bias = on_gpu(fresh_tensor({4}));
  Tensor td = on_gpu(Tensor::zeros({8}));
  gpu().synchronize();  // the uploads ran on nnlab's stream; the calls below use the default stream
  const float one = 1.0f, zero = 0.0f;
  auto run = [&](const void* a_data, const cublasLtMatmulAlgo_t* algo) {
    const cublasStatus_t st = cublasLtMatmul(h, desc, &one, a_data, a, tb.raw_data(), b, &zero, td.raw_data(), c,
                                             td.raw_data(), c, algo, nullptr, 0, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    return st;
  };
  CHECK(run(ta.raw_data(), &result.algo) == CUBLAS_STATUS_INVALID_VALUE);  // BIAS without a bias pointer
  void* bias_ptr = bias.raw_data();
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)) ==
          CUBLAS_STATUS_SUCCESS);
  const std::vector<float> host(12, 1.0f);
  CHECK(run(host.data(), &result.algo) == CUBLAS_STATUS_INVALID_VALUE);  // A in ordinary host memory
  cublasLtMatmulAlgo_t foreign = result.algo;
  foreign.data[1] ^= 1;  // chosen for another product
  CHECK(run(ta.raw_data(), &foreign) == CUBLAS_STATUS_INVALID_VALUE);
  REQUIRE(run(ta.raw_data(), &result.algo) == CUBLAS_STATUS_SUCCESS);
  // D = A·B + bias, column-major, against the sum written out
  const std::vector<float> av = ta.to_vector<float>(), bv = tb.to_vector<float>(), biasv = bias.to_vector<float>();
  const std::vector<float> dv = td.to_vector<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 3; ++k) s += av[i + 4 * k] * bv[k + 3 * j];
      CHECK(dv[i + 4 * j] == Approx(s + biasv[i]).margin(1e-6));
    }
  // an epilogue the simulator does not run gets no algorithm, as a library without one answers
  const uint32_t gelu = CUBLASLT_EPILOGUE_GELU;
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &gelu, sizeof(gelu)) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, 1, &result, &found) == CUBLAS_STATUS_NOT_SUPPORTED);
  for (cublasLtMatrixLayout_t l : {a, b, c, wide}) CHECK(cublasLtMatrixLayoutDestroy(l) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulPreferenceDestroy(pref) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_INVALID_VALUE);  // destroyed twice
  CHECK(cublasLtDestroy(h) == CUBLAS_STATUS_SUCCESS);
}

namespace {

// x rounded to bf16 (8 significant bits), to nearest even, by arithmetic rather than bits: x =
// m·2^e with m in [0.5, 1), so m·2^8 rounded to an integer (nearbyint: ties to even) keeps 8.
float bf16_reference(float x) {
  int e = 0;
  const double m = std::frexp(static_cast<double>(x), &e);
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8));
}

// C = A·B (row-major, m×k by k×n) with A and B rounded to bf16, summed in double.
std::vector<double> bf16_product(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                                 int64_t k) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l)
        c[size_t(i * n + j)] += double(bf16_reference(a[size_t(i * k + l)])) * bf16_reference(b[size_t(l * n + j)]);
  return c;
}

struct MathScope {
  explicit MathScope(CudaMath m) { set_cuda_math_mode(static_cast<int>(m)); }
  ~MathScope() { set_cuda_math_mode(static_cast<int>(CudaMath::Fp32)); }
  MathScope(const MathScope&) = delete;
  MathScope& operator=(const MathScope&) = delete;
};

}  // namespace

// --math bf16: the product of values that bf16 cannot hold. 1 + 3·2⁻⁸ lies halfway between
// bf16's 1 + 2⁻⁷ and 1 + 2⁻⁶ and rounds to the even one, 1 + 2⁻⁶; 1 + 2⁻⁸ + 2⁻²⁰ lies just over
// halfway and rounds up; truncation would give 1 + 2⁻⁷ and 1. Then random 37×29×301 products
// through cublasGemmEx (gemm) and cuBLASLt (a Linear's forward) against the rounded inputs
// summed in double. On the simulator the rounding is exact; a GPU's cuBLAS may keep more bits
// for some shapes ("allows down-converting"), so there only bf16's closeness is required.
TEST_CASE("gpu: bf16 math rounds the products' inputs to bf16, to nearest even", "[gpu][gemm][bf16]") {
  MathScope bf16(CudaMath::Bf16);
  const float halfway = 1.0f + 3.0f / 256.0f, over_half = 1.0f + 1.0f / 256.0f + 1.0f / (1 << 20);
  REQUIRE(bf16_reference(halfway) == 1.0f + 1.0f / 64.0f);
  REQUIRE(bf16_reference(over_half) == 1.0f + 1.0f / 128.0f);
  for (const float v : {halfway, over_half}) {
    Tensor c = on_gpu(Tensor::zeros({1, 1}));
    gpu().gemm(false, false, 1, 1, 1, 1.0, on_gpu(Tensor::full({1, 1}, v)), on_gpu(Tensor::full({1, 1}, 1.0)), 0.0, c);
    const float got = c.to_vector<float>()[0];
    if (cuda_simulated()) CHECK(got == bf16_reference(v));
    else CHECK(std::fabs(got - v) <= std::ldexp(1.0f, -7));
  }
  const int64_t m = 37, n = 29, k = 301;
  const Tensor a = fresh_tensor({m, k}), b = fresh_tensor({k, n}), w = fresh_tensor({n, k}), bias = Tensor::zeros({n});
  const std::vector<double> want = bf16_product(a.to_vector<float>(), b.to_vector<float>(), m, n, k);
  Tensor c = on_gpu(Tensor::zeros({m, n})), y = on_gpu(Tensor::zeros({m, n}));
  gpu().gemm(false, false, m, n, k, 1.0, on_gpu(a), on_gpu(b), 0.0, c);
  // y = a·wᵀ + 0 through cuBLASLt, against the same sums with wᵀ's rows
  std::vector<float> wt(static_cast<size_t>(k * n));
  const std::vector<float> wv = w.to_vector<float>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < k; ++l) wt[size_t(l * n + j)] = wv[size_t(j * k + l)];
  const std::vector<double> want_y = bf16_product(a.to_vector<float>(), wt, m, n, k);
  const Tensor gb = on_gpu(bias);
  gpu().linear_forward(on_gpu(a), on_gpu(w), &gb, y, false);
  const std::vector<float> got_c = c.to_vector<float>(), got_y = y.to_vector<float>();
  const std::vector<float> fp32 = [&] {  // the same product in float32, for the size of bf16's effect
    MathScope strict(CudaMath::Fp32);
    Tensor f = on_gpu(Tensor::zeros({m, n}));
    gpu().gemm(false, false, m, n, k, 1.0, on_gpu(a), on_gpu(b), 0.0, f);
    return f.to_vector<float>();
  }();
  set_cuda_math_mode(static_cast<int>(CudaMath::Bf16));
  double worst_c = 0, worst_y = 0, bf16_effect = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst_c = std::max(worst_c, std::fabs(got_c[i] - want[i]));
    worst_y = std::max(worst_y, std::fabs(got_y[i] - want_y[i]));
    bf16_effect = std::max(bf16_effect, std::fabs(fp32[i] - want[i]));
  }
  INFO("worst gap to the rounded inputs' sums: gemm " << worst_c << ", Linear " << worst_y
                                                      << "; float32's gap to them " << bf16_effect);
  CHECK(bf16_effect > 1e-3);  // inputs in [-1, 1): rounding to 8 bits moves a 301-term sum visibly
  const double float_sums = cuda_simulated() ? 1e-4 : 2 * bf16_effect;  // float32 sums of 301 terms
  CHECK(worst_c <= float_sums);
  CHECK(worst_y <= float_sums);
}
