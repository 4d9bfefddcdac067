// The host side of the CUDA backend's library calls and its edge cases: cuDNN's algorithm
// choice on made-up result arrays, cuDNN's descriptors against nnlab's convolution shapes,
// GEMM with an empty inner dimension, an empty batch in BatchNorm, and host → device copies
// whose source is reused at once. On the simulator, also the simulator's own checks: a host
// pointer handed to a kernel and a copy whose direction does not match its pointers.
#include <cudnn.h>

#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "devices/cuda/conv2d_algorithm_pick.h"
#include "gpu/gpu_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

cudnnConvolutionFwdAlgoPerf_t perf(cudnnConvolutionFwdAlgo_t algo, cudnnStatus_t status, size_t memory,
                                   cudnnDeterminism_t det, cudnnMathType_t math) {
  cudnnConvolutionFwdAlgoPerf_t p{};
  p.algo = algo, p.status = status, p.time = 1.0f, p.memory = memory, p.determinism = det, p.mathType = math;
  return p;
}

}  // namespace

TEST_CASE("gpu: the cuDNN algorithm pick honours status, workspace, math mode and determinism",
          "[gpu][conv2d][cudnn]") {
  const Conv2dGeometry g{2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 8, 8};
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> results = {
      perf(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH),
      perf(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS, 1 << 30, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH),
      perf(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, 0, CUDNN_DETERMINISTIC,
           CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
      perf(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_SUCCESS, 64, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH),
      perf(CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, CUDNN_STATUS_SUCCESS, 0, CUDNN_NON_DETERMINISTIC, CUDNN_DEFAULT_MATH),
      perf(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH)};
  const int n = static_cast<int>(results.size());
  // Strict float32: skips the failed one, the one over the workspace and the TF32 one.
  CHECK(cuda::pick_algorithm(results.data(), n, 1 << 20, false, false, "forward", g).algo ==
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD);
  // TF32 allowed: the tensor-op candidate is now the fastest that fits.
  CHECK(cuda::pick_algorithm(results.data(), n, 1 << 20, true, false, "forward", g).algo ==
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  // Deterministic: no Winograd, nothing non-deterministic.
  CHECK(cuda::pick_algorithm(results.data(), n, 1 << 20, false, true, "forward", g).algo ==
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
  // The non-fused Winograd is never picked, however fast (it missed float32 parity on an H100).
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> winograd_first = {
      perf(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, CUDNN_STATUS_SUCCESS, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH),
      perf(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH)};
  for (bool tf32 : {false, true})
    CHECK(cuda::pick_algorithm(winograd_first.data(), 2, 1 << 20, tf32, false, "forward", g).algo ==
          CUDNN_CONVOLUTION_FWD_ALGO_GEMM);
  // Nothing qualifies: one message naming the direction and the geometry.
  CHECK_THROWS_WITH(cuda::pick_algorithm(results.data(), 3, 1 << 20, false, true, "forward", g),
                    Catch::Contains("conv2d forward on CUDA") && Catch::Contains("x (2, 3, 8, 8)"));
}

TEST_CASE("gpu: cuDNN's descriptors give the output shape nnlab's conv2d computes", "[gpu][conv2d][cudnn]") {
  struct Case {
    int64_t n, c, h, w, k, r, s, stride, pad;
  };
  for (const Case& t : {Case{1, 1, 28, 28, 32, 3, 3, 1, 1}, Case{2, 3, 32, 32, 6, 5, 5, 1, 0},
                        Case{3, 2, 9, 7, 4, 3, 3, 2, 1}, Case{1, 4, 5, 5, 2, 1, 1, 3, 0}}) {
    const Tensor y = conv2d(Tensor::zeros({t.n, t.c, t.h, t.w}), Tensor::zeros({t.k, t.c, t.r, t.s}), Tensor(),
                            t.stride, t.stride, t.pad, t.pad);
    cudnnTensorDescriptor_t x_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    REQUIRE(cudnnCreateTensorDescriptor(&x_desc) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateFilterDescriptor(&w_desc) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateConvolutionDescriptor(&conv_desc) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(t.n), int(t.c), int(t.h),
                                       int(t.w)) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetFilter4dDescriptor(w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(t.k), int(t.c), int(t.r),
                                       int(t.s)) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolution2dDescriptor(conv_desc, int(t.pad), int(t.pad), int(t.stride), int(t.stride), 1, 1,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
    int n = 0, k = 0, p = 0, q = 0;
    REQUIRE(cudnnGetConvolution2dForwardOutputDim(conv_desc, x_desc, w_desc, &n, &k, &p, &q) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(Shape{n, k, p, q} == y.shape());
    cudnnDestroyConvolutionDescriptor(conv_desc);
    cudnnDestroyFilterDescriptor(w_desc);
    cudnnDestroyTensorDescriptor(x_desc);
  }
}

// --deterministic ranks by cuDNN's heuristics, not by timing: for the same geometry they must
// answer the same list every time, in all three directions, with a runnable algorithm first
// (timed Find may not: its order follows the clock, and two algorithms' sums differ in the
// last bit, which is how the losses of two runs once parted in CI).
TEST_CASE("gpu: cuDNN's heuristics rank a geometry's algorithms the same way every time", "[gpu][conv2d][cudnn]") {
  cudnnHandle_t h;
  cudnnTensorDescriptor_t x_desc, y_desc;
  cudnnFilterDescriptor_t w_desc;
  cudnnConvolutionDescriptor_t conv_desc;
  REQUIRE(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateTensorDescriptor(&x_desc) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateTensorDescriptor(&y_desc) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateFilterDescriptor(&w_desc) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateConvolutionDescriptor(&conv_desc) == CUDNN_STATUS_SUCCESS);
  // x (8, 6, 14, 14), w (16, 6, 5, 5), no padding: y (8, 16, 10, 10), the cnn's second layer.
  REQUIRE(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 8, 6, 14, 14) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptor(y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 8, 16, 10, 10) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 16, 6, 5, 5) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolution2dDescriptor(conv_desc, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_SUCCESS);
  int fwd_max = 0, data_max = 0, filter_max = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &fwd_max) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &data_max) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &filter_max) == CUDNN_STATUS_SUCCESS);
  std::vector<std::pair<int, int>> first_order;
  for (int round = 0; round < 2; ++round) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(fwd_max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(static_cast<size_t>(data_max));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(static_cast<size_t>(filter_max));
    int counts[3] = {0, 0, 0};
    REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc, w_desc, conv_desc, y_desc, fwd_max, &counts[0],
                                                   fwd.data()) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc, y_desc, conv_desc, x_desc, data_max, &counts[1],
                                                        data.data()) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc, y_desc, conv_desc, w_desc, filter_max,
                                                          &counts[2], filter.data()) == CUDNN_STATUS_SUCCESS);
    for (int count : counts) REQUIRE(count > 0);
    CHECK(fwd[0].status == CUDNN_STATUS_SUCCESS);
    CHECK(data[0].status == CUDNN_STATUS_SUCCESS);
    CHECK(filter[0].status == CUDNN_STATUS_SUCCESS);
    // Each direction's list as (algorithm, math type) pairs, in rank order.
    std::vector<std::pair<int, int>> order;
    for (int i = 0; i < counts[0]; ++i) order.emplace_back(int(fwd[size_t(i)].algo), int(fwd[size_t(i)].mathType));
    for (int i = 0; i < counts[1]; ++i) order.emplace_back(int(data[size_t(i)].algo), int(data[size_t(i)].mathType));
    for (int i = 0; i < counts[2]; ++i)
      order.emplace_back(int(filter[size_t(i)].algo), int(filter[size_t(i)].mathType));
    if (round == 0) first_order = order;
    CHECK(order == first_order);
  }
  cudnnDestroyConvolutionDescriptor(conv_desc);
  cudnnDestroyFilterDescriptor(w_desc);
  cudnnDestroyTensorDescriptor(y_desc);
  cudnnDestroyTensorDescriptor(x_desc);
  cudnnDestroy(h);
}

TEST_CASE("gpu: gemm with an empty inner dimension is C = beta·C, as on the CPU", "[gpu][gemm]") {
  const Tensor a = Tensor::empty({3, 0}), b = Tensor::empty({0, 4});
  for (double beta : {0.0, 0.5}) {
    Tensor c_cpu = fresh_tensor({3, 4});
    Tensor c_gpu = on_gpu(c_cpu);
    cpu().gemm(false, false, 3, 4, 0, 1.0, a, b, beta, c_cpu);
    gpu().gemm(false, false, 3, 4, 0, 1.0, on_gpu(a), on_gpu(b), beta, c_gpu);
    require_allclose(c_gpu, c_cpu, 0, 0, "C = beta·C");
  }
}

TEST_CASE("gpu: an empty batch in BatchNorm is refused in training and passes evaluation", "[gpu][batchnorm]") {
  Tensor x = on_gpu(Tensor::zeros({0, 3, 4, 4})), y = on_gpu(Tensor::zeros({0, 3, 4, 4}));
  Tensor g = on_gpu(Tensor::full({3}, 1.0)), b = on_gpu(Tensor::zeros({3}));
  Tensor rm = on_gpu(Tensor::zeros({3})), rv = on_gpu(Tensor::full({3}, 1.0));
  Tensor mean = on_gpu(Tensor::zeros({3})), invstd = on_gpu(Tensor::zeros({3}));
  CHECK_THROWS_WITH(gpu().batchnorm_forward_train(x, g, b, rm, rv, 0.1, 1e-5, y, mean, invstd),
                    Catch::Contains("more than one value per channel"));
  CHECK_NOTHROW(gpu().batchnorm_forward_eval(x, g, b, rm, rv, 1e-5, y));
}

TEST_CASE("gpu: a host → device copy has read its source when it returns", "[gpu][memory]") {
  std::vector<float> host(4096);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  Tensor dev = Tensor::empty({4096}, DType::Float32, Device::cuda(0));
  std::vector<Tensor> queued;
  for (int round = 0; round < 6; ++round) {  // more copies in flight than staging buffers
    gpu().copy_from_host(dev, host.data());
    queued.push_back(dev.clone());
    for (float& v : host) v += 1.0f;  // the caller reuses its buffer at once
  }
  for (int round = 0; round < 6; ++round) {
    const std::vector<float> back = queued[size_t(round)].to_vector<float>();
    INFO("round " << round);
    CHECK(back[0] == float(round));
    CHECK(back[4095] == float(4095 + round));
  }
}

TEST_CASE("gpu: the simulator names a host pointer given to the device and a copy in the wrong direction",
          "[gpu][simulator]") {
  if (!cuda_simulated()) return;  // a GPU faults later and less precisely; compute-sanitizer names it
  std::vector<float> host(16, 1.0f);
  Tensor dev = Tensor::zeros({16}, DType::Float32, Device::cuda(0));
  Tensor host_backed = Tensor::from_vector(host, {16});
  // A CPU tensor handed to a CUDA kernel: refused at launch, naming the kernel and the argument.
  CHECK_THROWS_WITH(gpu().axpby(1.0, host_backed, 1.0, dev),
                    Catch::Contains("axpby_kernel") && Catch::Contains("ordinary host memory"));
  CHECK_THROWS_WITH(gpu().copy_to_host(host_backed, host.data()),
                    Catch::Contains("cudaMemcpyDeviceToHost") && Catch::Contains("ordinary host memory"));
  // The refused copy is reported once: the next kernel launch does not inherit its error.
  CHECK_NOTHROW(gpu().axpby(1.0, dev, 1.0, dev));
  CHECK(dev.to_vector<float>() == std::vector<float>(16, 0.0f));
}
