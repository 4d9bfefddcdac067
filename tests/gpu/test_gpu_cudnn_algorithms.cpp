// Every cuDNN convolution algorithm, not only the one cudnnFind ranks first, against the CPU.
// nnlab picks the fastest algorithm that cuDNN's timing ranks first (conv2d_cuda.cu), and that
// ranking moves with the load on the machine: an algorithm that is wrong on some geometry would
// show only in the runs where it happens to win. So each algorithm cuDNN accepts for a geometry
// is run here in strict float32 (CUDNN_FMA_MATH), and all that nnlab may pick must agree with
// the CPU; those it never picks (cuda::is_inaccurate: the non-fused Winograds, found by this
// test on an H100) are run and their error printed, unchecked.
#include <cudnn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "devices/cuda/conv2d_algorithm_pick.h"
#include "devices/cuda/cuda_backend.h"
#include "conv_support.h"
#include "gpu/gpu_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

#define CUDNN_REQUIRE(call) REQUIRE((call) == CUDNN_STATUS_SUCCESS)

Conv2dGeometry geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t pad) {
  return {n, c, h, w, k, r, r, 1, 1, pad, pad, h + 2 * pad - r + 1, w + 2 * pad - r + 1};
}

// cuDNN's descriptors for one geometry (NCHW float32, cross-correlation, strict FMA math).
struct Descriptors {
  cudnnHandle_t handle{};
  cudnnTensorDescriptor_t x{}, y{};
  cudnnFilterDescriptor_t w{};
  cudnnConvolutionDescriptor_t conv{};
  explicit Descriptors(const Conv2dGeometry& g) {
    CUDNN_REQUIRE(cudnnCreate(&handle));
    CUDNN_REQUIRE(cudnnCreateTensorDescriptor(&x));
    CUDNN_REQUIRE(cudnnCreateTensorDescriptor(&y));
    CUDNN_REQUIRE(cudnnCreateFilterDescriptor(&w));
    CUDNN_REQUIRE(cudnnCreateConvolutionDescriptor(&conv));
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    CUDNN_REQUIRE(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.n), i(g.c), i(g.h), i(g.w)));
    CUDNN_REQUIRE(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.n), i(g.k), i(g.p), i(g.q)));
    CUDNN_REQUIRE(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(g.k), i(g.c), i(g.r), i(g.s)));
    CUDNN_REQUIRE(cudnnSetConvolution2dDescriptor(conv, i(g.pad_h), i(g.pad_w), i(g.stride_h), i(g.stride_w), 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_REQUIRE(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
  }
  ~Descriptors() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroy(handle);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// Device scratch of at least `bytes`, ready for a call on another stream. The backend's
// caching allocator hands blocks out in its own stream's order (under AddressSanitizer it
// queues the block's unpoisoning there), while this test's cuDNN handle runs on the default
// stream: without the synchronisation the call could reach the block first (the simulator's
// ASan job caught exactly that race). The caller synchronises again after each call.
Tensor workspace(size_t bytes) {
  Tensor ws = Tensor::empty({static_cast<int64_t>(bytes / sizeof(float) + 1)}, DType::Float32, Device::cuda(0));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return ws;
}

std::string describe(const Conv2dGeometry& g) {
  return "x(" + std::to_string(g.n) + "," + std::to_string(g.c) + "," + std::to_string(g.h) + "," +
         std::to_string(g.w) + ") w(" + std::to_string(g.k) + "," + std::to_string(g.r) + "," + std::to_string(g.s) +
         ") pad " + std::to_string(g.pad_h);
}

// Runs every algorithm of one direction that cuDNN accepts here (a workspace size, then a
// successful call), each into `out`, and checks it against the CPU's `want`; algorithms nnlab
// never picks (cuda::is_inaccurate) are run and printed, unchecked. Returns how many ran.
// `workspace_size(algo, &bytes)` and `run(algo, workspace, bytes)` are the direction's calls.
template <typename Algo, typename WorkspaceSize, typename Run>
int check_every_algorithm(int algo_count, const std::string& what, WorkspaceSize workspace_size, Run run,
                          const Tensor& out, const Tensor& want, double atol) {
  int ran = 0;
  for (int a = 0; a < algo_count; ++a) {
    const auto algo = static_cast<Algo>(a);
    size_t bytes = 0;
    if (workspace_size(algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    Tensor ws = workspace(bytes);
    if (run(algo, ws.raw_data(), bytes) != CUDNN_STATUS_SUCCESS) continue;
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    ++ran;
    const double worst = nnlab_test::worst_excess(out.to_vector<double>(), want.to_vector<double>(), 1e-5, atol).worst;
    const bool excluded = cuda::is_inaccurate(algo);
    // Printed for every algorithm, so one run on a GPU shows them all.
    std::printf("cuDNN %s algo %d: %.3g of the tolerance%s\n", what.c_str(), a, worst, excluded ? " (never picked)" : "");
    if (excluded) continue;
    INFO(what << " algo " << a << ": worst element at " << worst << "× the tolerance rtol 1e-05 atol " << atol);
    CHECK(worst <= 1.0);
  }
  return ran;
}

}  // namespace

TEST_CASE("gpu: every cuDNN convolution algorithm cuDNN accepts agrees with the CPU", "[gpu][conv2d][cudnn]") {
  // The parity test's shapes (the 5 × 5 one failed there once) and the zoo's convolutions.
  for (const Conv2dGeometry& g : {geometry(1, 1, 28, 28, 8, 5, 0), geometry(2, 3, 8, 8, 4, 3, 1),
                                  geometry(16, 1, 28, 28, 32, 3, 1), geometry(16, 32, 14, 14, 64, 3, 1),
                                  geometry(16, 1, 28, 28, 6, 5, 2), geometry(16, 6, 14, 14, 16, 5, 0)}) {
    const double atol_data = 1e-6 * static_cast<double>(g.k * g.r * g.s) + 1e-6;
    const double atol_out = 1e-6 * static_cast<double>(g.c * g.r * g.s) + 1e-6;
    const double atol_filter = 1e-6 * static_cast<double>(g.n * g.p * g.q) + 1e-6;
    const Tensor x = fresh_tensor({g.n, g.c, g.h, g.w}), w = fresh_tensor({g.k, g.c, g.r, g.s});
    const Tensor dy = fresh_tensor({g.n, g.k, g.p, g.q});
    Tensor y = Tensor::empty({g.n, g.k, g.p, g.q}), dx = Tensor::empty({g.n, g.c, g.h, g.w});
    Tensor dw = Tensor::empty({g.k, g.c, g.r, g.s});
    nnlab_test::conv_forward(cpu(), g, x, w, nullptr, y);
    nnlab_test::conv_backward_data(cpu(), g, dy, w, dx);
    nnlab_test::conv_backward_filter(cpu(), g, dy, x, dw);
    const Tensor gx = on_gpu(x), gw = on_gpu(w), gdy = on_gpu(dy);
    Tensor out = Tensor::empty(y.shape(), DType::Float32, Device::cuda(0));
    Tensor out_dx = Tensor::empty(dx.shape(), DType::Float32, Device::cuda(0));
    Tensor out_dw = Tensor::empty(dw.shape(), DType::Float32, Device::cuda(0));
    Descriptors d(g);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the uploads, on the backend's stream
    const float one = 1.0f, zero = 0.0f;
    const std::string name = describe(g);
    const int forward = check_every_algorithm<cudnnConvolutionFwdAlgo_t>(
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, name + " forward",
        [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(d.handle, d.x, d.w, d.conv, d.y, algo, bytes);
        },
        [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
          return cudnnConvolutionForward(d.handle, &one, d.x, gx.raw_data(), d.w, gw.raw_data(), d.conv, algo, ws,
                                         bytes, &zero, d.y, out.raw_data());
        },
        out, y, atol_out);
    const int data = check_every_algorithm<cudnnConvolutionBwdDataAlgo_t>(
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, name + " backward data",
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(d.handle, d.w, d.y, d.conv, d.x, algo, bytes);
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
          return cudnnConvolutionBackwardData(d.handle, &one, d.w, gw.raw_data(), d.y, gdy.raw_data(), d.conv, algo,
                                              ws, bytes, &zero, d.x, out_dx.raw_data());
        },
        out_dx, dx, atol_data);
    const int filter = check_every_algorithm<cudnnConvolutionBwdFilterAlgo_t>(
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, name + " backward filter",
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(d.handle, d.x, d.y, d.conv, d.w, algo, bytes);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t bytes) {
          return cudnnConvolutionBackwardFilter(d.handle, &one, d.x, gx.raw_data(), d.y, gdy.raw_data(), d.conv, algo,
                                                ws, bytes, &zero, d.w, out_dw.raw_data());
        },
        out_dw, dw, atol_filter);
    CHECK(forward >= 1);  // at least one algorithm per direction ran
    CHECK(data >= 1);
    CHECK(filter >= 1);
  }
}
