// The CUDA backend's set-up: probing for a usable device, the per-device context (stream,
// cuBLAS and cuDNN handles, caching allocator over cudaMalloc/cudaFree), math modes and the
// device report. The kernels themselves are in the <family>_cuda.cu files.
#include "devices/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "devices/cuda/cuda_context.h"
#ifdef NNLAB_CUDA_SIMULATOR
#include "devices/cuda/sim/sim.h"
#endif

namespace nnlab {

namespace cuda {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    fail("launch of ", kernel, " failed: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ")",
         simulator_detail(), " at ", file, ":", line);
}

std::string simulator_detail() {
#ifdef NNLAB_CUDA_SIMULATOR
  const std::string& detail = sim::last_diagnostic();
  return detail.empty() ? std::string() : " (" + detail + ")";
#else
  return std::string();
#endif
}

void Context::raise_device_fault() {
  const int32_t code = fault_host[0];
  if (code == 0) return;
  const int32_t value = fault_host[1], index = fault_host[2], bound = fault_host[3];
  std::memset(fault_host, 0, 4 * sizeof(int32_t));
  if (code == static_cast<int32_t>(DeviceFault::LabelOutOfRange))
    fail("cross_entropy: label ", value, " of sample ", index, " is outside the model's ", bound, " classes [0, ",
         bound, ") (found on cuda:", device, "); check the data set and the model");
  fail("a gather (gather_rows or gather_images): index ", value, " (position ", index, ") outside [0, ", bound, ") (found on cuda:", device,
       ")");
}

}  // namespace cuda

namespace {

std::atomic<int> g_math{static_cast<int>(CudaMath::Fp32)};
std::atomic<bool> g_deterministic{false};

std::string version_str(int v) {  // CUDA encodes 12040 as 12.4
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

CudaStatus probe_uncached() {
  CudaStatus s;
  int driver = 0;
  const cudaError_t derr = cudaDriverGetVersion(&driver);
  if (derr != cudaSuccess || driver == 0) {
    s.reason = "no NVIDIA driver is installed (libcuda.so could not be loaded); install the driver or use --device cpu";
    return s;
  }
  const std::string versions = "the driver supports CUDA " + version_str(driver) + " but nnlab was built with the CUDA " +
                               version_str(CUDART_VERSION) + " runtime";
  if (driver / 1000 < CUDART_VERSION / 1000) {
    s.reason = "the NVIDIA driver is too old: " + versions + "; update the driver or use --device cpu";
    return s;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorInsufficientDriver) {
    s.reason = "the NVIDIA driver is too old: " + versions + "; update the driver or use --device cpu";
  } else if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    s.reason = "the NVIDIA driver is loaded but no CUDA GPU is present (or CUDA_VISIBLE_DEVICES hides them all)";
  } else if (err != cudaSuccess) {
    s.reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
  } else {
    s.usable = true;
    s.device_count = count;
  }
  cudaGetLastError();  // a failed probe must not poison later error checks
  return s;
}

// The calling thread's current CUDA device (cudaSetDevice is per thread), set here and only
// here: launches, copies and allocations all go to the device last selected.
void select_device(int index) {
  static thread_local int current = -1;
  if (current == index) return;
  NNLAB_CUDA_CHECK(cudaSetDevice(index));
  current = index;
}

// cudaMalloc for the caching allocator: nullptr means out of memory (the allocator then
// empties its cache, tries again and reports the sizes). Any other failure, a sticky fault
// of an earlier kernel above all, is not a memory shortage and says what it is.
CachingAllocator::RawAlloc device_malloc(int index) {
  return [index](size_t bytes) -> void* {
    select_device(index);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // out of memory is reported by the allocator, not left behind
      return nullptr;
    }
    if (err != cudaSuccess)
      fail("cudaMalloc(", bytes, " bytes) on cuda:", index, " failed: ", cudaGetErrorString(err), " (",
           cudaGetErrorName(err), ")", cuda::simulator_detail(),
           err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure
               ? "; an earlier kernel faulted and the CUDA context can no longer be used (rerun with "
                 "--check-numerics or under compute-sanitizer to find it)"
               : "");
    return p;
  };
}

}  // namespace

CudaStatus cuda_probe() {
  static const CudaStatus status = probe_uncached();
  return status;
}

void set_cuda_math_mode(int mode) {
  NNLAB_CHECK(mode >= static_cast<int>(CudaMath::Fp32) && mode <= static_cast<int>(CudaMath::Bf16),
              "set_cuda_math_mode: ", mode, " is not a math mode");
  g_math = mode;
}
int cuda_math_mode() { return g_math; }
bool cuda_math_tf32() { return g_math != static_cast<int>(CudaMath::Fp32); }
bool cuda_math_bf16() { return g_math == static_cast<int>(CudaMath::Bf16); }
void set_cuda_deterministic(bool on) { g_deterministic = on; }
bool cuda_deterministic() { return g_deterministic; }

CudaBackend::CudaBackend(int index)
    : Backend(Device::cuda(index)),
      allocator_(std::make_unique<CachingAllocator>(Device::cuda(index).str(), device_malloc(index),
                                                    [](void* p) { cudaFree(p); })),
      ctx_(std::make_unique<cuda::Context>()) {
  cuda::Context& c = *ctx_;
  c.device = index;
  c.allocator = allocator_.get();
  select_device(index);
  cudaDeviceProp prop{};
  NNLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  const int64_t resident_threads = int64_t(prop.multiProcessorCount) * prop.maxThreadsPerMultiProcessor;
  c.resident_blocks = std::max<int64_t>(1, resident_threads / cuda::kThreads);
  NNLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
#ifdef NNLAB_CUDA_SIMULATOR
  // The allocator's AddressSanitizer poisoning follows the stream, as the blocks' users do.
  allocator_->set_device_order([stream = c.stream](std::function<void()> step) {
    sim::enqueue(stream, "host", "allocator poisoning", std::move(step), false);
  });
#endif
  NNLAB_CUBLAS_CHECK(cublasCreate(&c.cublas));
  NNLAB_CUBLAS_CHECK(cublasSetStream(c.cublas, c.stream));
  NNLAB_CUBLAS_CHECK(cublasSetMathMode(c.cublas, CUBLAS_DEFAULT_MATH));  // strict float32: no TF32
  NNLAB_CUBLAS_CHECK(cublasLtCreate(&c.cublas_lt));
  NNLAB_CUDNN_CHECK(cudnnCreate(&c.cudnn));
  NNLAB_CUDNN_CHECK(cudnnSetStream(c.cudnn, c.stream));
  NNLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&c.first_nonfinite), sizeof(int32_t)));
  NNLAB_CUDA_CHECK(cudaMemsetAsync(c.first_nonfinite, 0x7f, sizeof(int32_t), c.stream));
  void* fault = nullptr;
  NNLAB_CUDA_CHECK(cudaHostAlloc(&fault, 4 * sizeof(int32_t), cudaHostAllocMapped));
  std::memset(fault, 0, 4 * sizeof(int32_t));
  c.fault_host = static_cast<int32_t*>(fault);
  void* fault_dev = nullptr;
  NNLAB_CUDA_CHECK(cudaHostGetDevicePointer(&fault_dev, fault, 0));
  c.fault_device = static_cast<int32_t*>(fault_dev);
}

// Never runs for the registry's backends (they live until exit); kept for completeness.
CudaBackend::~CudaBackend() {
  cuda::Context& c = *ctx_;
  c.conv_plans.clear();
  c.lt_plans.clear();
  if (c.pinned) cudaFreeHost(c.pinned);
  for (cuda::Context::Staging& s : c.upload_staging) {
    if (s.copied) cudaEventSynchronize(s.copied), cudaEventDestroy(s.copied);
    if (s.host) cudaFreeHost(s.host);
  }
  for (cudaEvent_t e : c.small_group_copied)
    if (e) cudaEventSynchronize(e), cudaEventDestroy(e);
  if (c.small_uploads) cudaFreeHost(c.small_uploads);
  if (c.fault_host) cudaFreeHost(c.fault_host);
  if (c.first_nonfinite) cudaFree(c.first_nonfinite);
  if (c.cudnn) cudnnDestroy(c.cudnn);
  if (c.cublas) cublasDestroy(c.cublas);
  if (c.cublas_workspace) cudaFree(c.cublas_workspace);
  if (c.cublas_lt) cublasLtDestroy(c.cublas_lt);
  if (c.lt_workspace) c.allocator->deallocate(c.lt_workspace);
  if (c.stream) cudaStreamDestroy(c.stream);
}

std::string CudaBackend::name() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ctx_->device) != cudaSuccess) return "CUDA";
  return std::string("CUDA (cuBLAS + cuDNN) on ") + prop.name;
}

// cuBLAS's and cuDNN's bf16 products run on the tensor cores of Ampere (8.0) and later; an
// older GPU answers CUBLAS_STATUS_NOT_SUPPORTED deep inside a step.
std::string CudaBackend::bf16_obstacle() const {
  cudaDeviceProp prop{};
  NNLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx_->device));
  if (prop.major >= 8) return {};
  return device().str() + " (" + prop.name + ") has compute capability " + std::to_string(prop.major) + "." +
         std::to_string(prop.minor) + "; bf16 tensors need 8.0 or later (Ampere, Hopper)";
}

void CudaBackend::synchronize() {
  NNLAB_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream));
  ctx_->raise_device_fault();
}

Backend& cuda_backend(int index) {
  static std::mutex mutex;
  // Leaked on purpose, the vector included (see the header): a static vector would be
  // destroyed at exit and leave its backends unreachable, which LeakSanitizer reports.
  static auto& backends = *new std::vector<CudaBackend*>();
  const CudaStatus s = cuda_probe();
  NNLAB_CHECK(s.usable, "cannot use cuda:", index, ": ", s.reason);
  NNLAB_CHECK(index >= 0 && index < s.device_count, "cuda:", index, " does not exist: ", s.device_count,
              " CUDA device(s) are present");
  select_device(index);  // launches go to the current device
  std::lock_guard<std::mutex> lock(mutex);
  if (backends.empty()) backends.resize(static_cast<size_t>(s.device_count), nullptr);
  if (!backends[index]) backends[index] = new CudaBackend(index);
  return *backends[index];
}

std::string cuda_device_report() {
  const CudaStatus s = cuda_probe();
  if (!s.usable) return "no usable CUDA GPU: " + s.reason;
#ifdef NNLAB_CUDA_SIMULATOR
  cudaDeviceProp sim{};
  cudaGetDeviceProperties(&sim, 0);
  int cublas_version[3] = {0, 0, 0};
  cublasGetProperty(MAJOR_VERSION, &cublas_version[0]);
  cublasGetProperty(MINOR_VERSION, &cublas_version[1]);
  cublasGetProperty(PATCH_LEVEL, &cublas_version[2]);
  const size_t cudnn_version = cudnnGetVersion();
  return "cuda:0: " + std::string(sim.name) + ", " + std::to_string(sim.totalGlobalMem >> 20) +
         " MiB of simulated device memory, no compute capability (the kernels run on " +
         std::to_string(sim.multiProcessorCount) + " CPU thread(s), devices/cuda/sim); the cuBLAS " +
         std::to_string(cublas_version[0]) + "." + std::to_string(cublas_version[1]) + "." +
         std::to_string(cublas_version[2]) + " interface on OpenBLAS, the cuDNN " + std::to_string(cudnn_version / 10000) +
         "." + std::to_string(cudnn_version % 10000 / 100) + " interface on CPU loops; its times are CPU times, not GPU "
         "times";
#endif
  int driver = 0, runtime = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cublasGetProperty(MAJOR_VERSION, &cublas_major);
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &cublas_patch);
  const size_t cudnn = cudnnGetVersion();  // 91900 for 9.19.0
  std::ostringstream os;
  for (int i = 0; i < s.device_count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      os << "cuda:" << i << ": properties unavailable\n";
      continue;
    }
    os << "cuda:" << i << ": " << prop.name << ", " << (prop.totalGlobalMem >> 20) << " MiB, compute capability "
       << prop.major << "." << prop.minor << ", " << prop.multiProcessorCount << " SMs; driver (CUDA) "
       << version_str(driver) << ", runtime " << version_str(runtime) << ", cuBLAS " << cublas_major << "."
       << cublas_minor << "." << cublas_patch << ", cuDNN " << cudnn / 10000 << "." << (cudnn % 10000) / 100 << "."
       << cudnn % 100 << "\n";
  }
  cudaGetLastError();
  std::string out = os.str();
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace nnlab
