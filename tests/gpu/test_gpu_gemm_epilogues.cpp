// A Linear layer's bias, ReLU and bias gradient folded into cuBLASLt epilogues
// (devices/cuda/gemm_lt.h): the results match the CPU twin's, the kernel log shows one call
// where the plain path makes two or three, the teaching ladders still get their own kernels,
// and, on the simulator, cuBLASLt refuses what its documentation calls wrong.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>
#include <tuple>
#include <vector>

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
