// What the CUDA kernel files share: the per-device context (stream, cuBLAS and cuDNN
// handles, the device-side error record, cached convolution plans) and small launch
// helpers. Included only by devices/cuda/*; it pulls in the CUDA headers.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "devices/backend.h"
#include "devices/cuda/cuda_check.h"
#include "devices/cuda/launch.h"
#include "devices/gemm_impl.h"

namespace nnlab::cuda {

// Every kernel runs on the context's one stream, so work is ordered without host
// synchronisation, and a buffer handed back to the caching allocator can be reused by the
// next kernel at once (it runs after every earlier kernel that used the buffer).
constexpr int kThreads = 256;

// Faults a kernel found without trapping (a trap would kill the CUDA context). The host
// reads the record whenever it synchronises anyway (copy_to_host, synchronize) and throws.
enum class DeviceFault : int32_t { None = 0, LabelOutOfRange = 1, GatherIndexOutOfRange = 2 };

// A convolution's cuDNN descriptors and chosen algorithms, made once per geometry.
struct ConvPlan {
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr, bias_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t fwd_desc = nullptr, bwd_data_desc = nullptr, bwd_filter_desc = nullptr;
  bool have_fwd = false, have_bwd_data = false, have_bwd_filter = false;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  size_t fwd_workspace = 0, bwd_data_workspace = 0, bwd_filter_workspace = 0;
  // The fused convolution + bias + ReLU (cudnnConvolutionBiasActivationForward): tried once
  // with the forward algorithm; a NOT_SUPPORTED answer leaves the separate calls in place.
  cudnnActivationDescriptor_t relu_desc = nullptr;
  bool fused_relu_tried = false, fused_relu_runs = false;
  // bf16 data (float32 sums): the tensor cores are allowed whatever the math mode
  bool bf16 = false;
  ~ConvPlan();
};
// n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, tf32, deterministic, bf16
using ConvKey = std::array<int64_t, 14>;

// A cuBLASLt product's descriptors and the algorithm its heuristic chose, made once per
// shape and epilogue (gemm_lt_cuda.cpp). usable = false: the library has no algorithm for it,
// and the caller takes the plain path.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool usable = false;
  ~LtPlan();
};
// trans_a, trans_b, m, n, k, epilogue, math (a CudaMath), bf16 storage
using LtKey = std::array<int64_t, 8>;

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  // cuBLASLt, for products with an epilogue (gemm_lt_cuda.cpp), and its fixed scratch (made at
  // the first such product): a graph capture must not let the library allocate.
  cublasLtHandle_t cublas_lt = nullptr;
  void* lt_workspace = nullptr;
  static constexpr size_t kLtWorkspaceBytes = size_t(4) << 20;
  std::map<LtKey, std::unique_ptr<LtPlan>> lt_plans;
  cudnnHandle_t cudnn = nullptr;
  // cuBLAS's scratch, fixed for the handle's life from the first graph capture on: cuBLAS
  // then allocates none of its own, which a capture requires (graph_cuda.cpp).
  void* cublas_workspace = nullptr;
  // check_finite_all's "first bad tensor" (softmax_xent_cuda.cu): all bits 0x7f when idle; the
  // kernel that reads it puts that back, so no memset is needed per check.
  int32_t* first_nonfinite = nullptr;
  CachingAllocator* allocator = nullptr;
  // The blocks of kThreads the device holds at once: SMs × (threads one SM keeps resident /
  // kThreads). grid_for launches no more than this.
  int64_t resident_blocks = 1;
  bool cublas_tf32 = false;  // the math mode last applied to the cuBLAS handle
  // Mapped, pinned host memory written by kernels: {fault, value, index, bound}.
  int32_t* fault_host = nullptr;
  int32_t* fault_device = nullptr;
  // Pinned staging for device → host copies (grown on demand, in copy_to_host only).
  void* pinned = nullptr;
  size_t pinned_bytes = 0;
  // Pinned staging for host → device copies: the caller's (pageable) memory is copied here
  // at once, so the caller may free it on return, and the DMA from here runs in stream order.
  // A buffer is reused once the event recorded after its copy has completed.
  struct Staging {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t copied = nullptr;
    uint64_t last_use = 0;
  };
  std::vector<Staging> upload_staging;
  uint64_t uploads = 0;
  // Small uploads (at most kSmallUploadBytes: a step's optimizer numbers) take the fixed slots
  // of one pinned block in turn: the host may run a few hundred uploads ahead of the device
  // before it waits, where the few large buffers above would make it wait every few steps.
  // The slots go in groups of kSmallUploadGroup with one event, recorded after the group's
  // last copy; a group is reused once that event has passed.
  static constexpr size_t kSmallUploadBytes = 4096, kSmallUploadSlots = 256, kSmallUploadGroup = 16;
  char* small_uploads = nullptr;
  std::array<cudaEvent_t, kSmallUploadSlots / kSmallUploadGroup> small_group_copied{};  // null until first used
  size_t next_small_upload = 0;
  // The next slot (at a group's start, waiting for that group's last round if it has not run);
  // `record` is set to the group's event when the caller must record it after its copy.
  char* small_upload_slot(cudaEvent_t& record);
  // A buffer of at least `bytes` whose last copy has run (waiting for the oldest when all
  // kMaxUploadBuffers are still in flight).
  Staging& upload_buffer(size_t bytes);
  std::map<ConvKey, std::unique_ptr<ConvPlan>> conv_plans;
  // A graph capture is under way on the stream (graph_cuda.cpp): copies between the host and
  // the device are refused with a message that says why.
  bool capturing = false;

  // Throws the first fault a kernel recorded (after a synchronisation), then clears it.
  void raise_device_fault();
};

// One thread per element with a grid-stride loop: each thread walks i, i + gridDim·blockDim, ...
// so any n is covered, and the grid is capped at the blocks the device holds at once. More
// blocks than that would only wait for a free SM, each paying its start; fewer threads that
// loop a few times do the same reads and writes. On the CUDA simulator, whose SMs are its CPU
// threads, the cap matters most: there every CUDA thread costs a fiber's bookkeeping, and one
// thread per element made the elementwise kernels cost about a microsecond per element under
// AddressSanitizer (docs/gpu.md).
inline unsigned grid_for(const Context& c, int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > c.resident_blocks ? c.resident_blocks : blocks));
}

#define NNLAB_GRID_STRIDE(i, n) NNLAB_GRID_STRIDE_AS(int64_t, i, n)

// The same loop in the index type I: int32_t where the caller knows every index fits (a GPU
// has no 64-bit divider, so index arithmetic with divisions costs several times as much in
// int64_t; pool2d_cuda.cu).
#define NNLAB_GRID_STRIDE_AS(I, i, n) \
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < (n); \
       i += static_cast<I>(blockDim.x) * static_cast<I>(gridDim.x))

// Scratch memory from the caching allocator for the length of one launcher. Handing it
// back before the kernels ran is safe: everything runs in order on one stream.
class Scratch {
 public:
  Scratch(CachingAllocator& alloc, size_t bytes) : alloc_(alloc), ptr_(bytes ? alloc.allocate(bytes) : nullptr) {}
  ~Scratch() { alloc_.deallocate(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  CachingAllocator& alloc_;
  void* ptr_;
};

// CUDA kernels are float32 only; float64 stays on the CPU for gradient checks.
inline void require_f32(const char* kernel, const Tensor& t) {
  NNLAB_CHECK(t.dtype() == DType::Float32, kernel, ": the CUDA kernel takes float32 only, got ", t.describe(),
              "; float64 (gradient checks) runs on the CPU");
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// reduce_cuda.cu: y (outer, c, inner) = b[channel] broadcast, float32 or bf16 alike (a bf16
// convolution's bias, set before cuDNN adds the product to it: conv2d_cuda.cu).
void bias_broadcast(Context& ctx, Tensor& y, const Tensor& b, int64_t inner);

// conv2d_reference_cuda.cu: the teaching convolution, one thread per output element, run
// by the conv2d kernels of conv2d_cuda.cu when --conv-impl reference is selected.
void conv2d_reference_forward(Context& c, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                              Tensor& y);
void conv2d_reference_backward_data(Context& c, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                                    Tensor& dx);
void conv2d_reference_backward_filter(Context& c, const Conv2dGeometry& g, const Tensor& dy, const Tensor& x,
                                      Tensor& dw);

// conv2d_direct_cuda.cu: a shallow convolution (c·r·s ≤ 32, stride 1) with its ReLU epilogue,
// or its ReLU and non-overlapping max-pool epilogue, in one kernel; and its filter gradient
// (and bias) straight from dy and the epilogue's saved tensor (y for the ReLU, argmax for the
// pool). Run by conv2d_cuda.cu under --conv-impl auto where direct_applies.
bool direct_applies(const Conv2dGeometry& g, const ConvEpilogue& e);
void conv2d_direct_forward(Context& c, const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x,
                           const Tensor& w, const Tensor* b, Tensor& y, Tensor* argmax);
void conv2d_direct_backward_filter(Context& c, const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy,
                                   const Tensor& saved, const Tensor& x, Tensor& dw, Tensor* db);

// gemm_ladder_cuda.cu: nnlab's own GEMM kernels (naive, tiled, registers), run by
// CudaBackend::gemm when --gemm-impl names one (devices/gemm_impl.h); m, n, k ≥ 1.
// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C, row-major, as Backend::gemm.
void gemm_ladder(Context& ctx, GemmImpl impl, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, const float* b, float beta, float* c);

}  // namespace nnlab::cuda
