// The CUDA simulator's cuda_runtime.h: what nnlab's .cu files use of the CUDA language and
// runtime, for the host compiler. Only the simulator build (NNLAB_CUDA_SIMULATOR) puts this
// folder on the include path, ahead of the toolkit's headers; under nvcc the real header is used.
//
// The language: __global__/__device__ are plain functions, __shared__ is a thread_local
// static (one block runs at a time on each CPU thread, so its threads share it, as a block
// shares shared memory), threadIdx/blockIdx/blockDim/gridDim read the running CUDA thread's
// coordinates, and __syncthreads() suspends the thread's fiber until every thread of the block
// has arrived (devices/cuda/sim/sim_threads.cpp); warp shuffles and __syncwarp() do the same
// for the lanes of a warp their mask names (devices/cuda/sim/sim_warps.cpp). Values and error
// codes match the toolkit's, so messages read the same on the simulator and on a GPU.
#pragma once
#include <math.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#define NNLAB_CUDA_SIMULATOR_HEADERS 1
#define CUDART_VERSION 13000

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __restrict__ __restrict

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorPeerAccessNotEnabled = 705,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorStreamCaptureWrongThread = 908,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;

struct CUgraph_st;
using cudaGraph_t = CUgraph_st*;
struct CUgraphExec_st;
using cudaGraphExec_t = CUgraphExec_st*;
struct CUgraphNode_st;
using cudaGraphNode_t = CUgraphNode_st*;
// Global: no thread may make a potentially unsafe call (cudaMalloc, a synchronising call)
// while the capture runs; ThreadLocal: only the capturing thread may not; Relaxed: any may.
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

constexpr unsigned cudaStreamDefault = 0x0, cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaHostAllocDefault = 0x0, cudaHostAllocPortable = 0x1, cudaHostAllocMapped = 0x2;
constexpr unsigned cudaEventDefault = 0x0, cudaEventDisableTiming = 0x2;

struct CUuuid_st {
  char bytes[16];
};
using cudaUUID_t = CUuuid_st;

struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  int pciBusID;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int canMapHostMemory;
  int unifiedAddressing;
};

// ---- runtime API (devices/cuda/sim/sim_runtime.cpp) --------------------------------------
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
// Several devices (NNLAB_SIM_DEVICES; devices/cuda/sim/sim_devices.cpp)
cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags);
cudaError_t cudaDeviceDisablePeerAccess(int peer);
cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream = nullptr);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
// A host function run in stream order: the stream's later work waits until it returns.
#define CUDART_CB
using cudaHostFn_t = void (*)(void* user_data);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// ---- stream capture and graphs (devices/cuda/sim/sim_graphs.cpp) ------------------------
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

// ---- the language's built-ins -----------------------------------------------------------
namespace nnlab::sim {
// The running CUDA thread's coordinates (set by the block scheduler before it runs or
// resumes a thread's fiber).
struct ThreadCoordinates {
  dim3 thread_idx, block_idx, block_dim, grid_dim;
};
extern thread_local std::atomic<ThreadCoordinates*> current_thread;
void syncthreads();

// Warp calls (devices/cuda/sim/sim_warps.cpp): the lanes a mask names meet, as at a barrier
// of their own, and a shuffle returns the bits of the lane it reads.
enum class ShuffleKind { Index, Up, Down, Xor };
uint64_t warp_shuffle(const char* call, unsigned mask, uint64_t bits, ShuffleKind kind, int arg, int width);
void syncwarp(unsigned mask);

// A shuffle of any value of up to 8 bytes, carried as its bits (the GPU moves registers).
template <typename T>
T shuffle(const char* call, unsigned mask, T var, ShuffleKind kind, int arg, int width) {
  static_assert(std::is_arithmetic_v<T> && sizeof(T) <= sizeof(uint64_t), "shuffles move numbers of up to 8 bytes");
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &var, sizeof var);
  bits = warp_shuffle(call, mask, bits, kind, arg, width);
  __builtin_memcpy(&var, &bits, sizeof var);
  return var;
}
}  // namespace nnlab::sim

#define threadIdx (::nnlab::sim::current_thread.load(std::memory_order_relaxed)->thread_idx)
#define blockIdx (::nnlab::sim::current_thread.load(std::memory_order_relaxed)->block_idx)
#define blockDim (::nnlab::sim::current_thread.load(std::memory_order_relaxed)->block_dim)
#define gridDim (::nnlab::sim::current_thread.load(std::memory_order_relaxed)->grid_dim)
inline void __syncthreads() { ::nnlab::sim::syncthreads(); }

// Warps: 32 threads of consecutive linear thread index. `mask` names the lanes taking part;
// each calling lane must be named, and every named lane that has not exited must make the
// same call with the same mask. A shuffle reads `var` of another lane of its `width`-lane
// segment: lane srcLane (__shfl_sync), lane − delta (up), lane + delta (down), lane ^ laneMask
// (xor); a source outside the segment gives the caller's own value, as CUDA defines. A source
// outside the mask, exited, or past the end of the block gives an undefined value on a GPU;
// here its bits are all ones (a NaN in a float), as fresh device memory is NaN.
inline constexpr int warpSize = 32;
template <typename T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
  return ::nnlab::sim::shuffle("__shfl_sync", mask, var, ::nnlab::sim::ShuffleKind::Index, srcLane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::nnlab::sim::shuffle("__shfl_up_sync", mask, var, ::nnlab::sim::ShuffleKind::Up, static_cast<int>(delta),
                               width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::nnlab::sim::shuffle("__shfl_down_sync", mask, var, ::nnlab::sim::ShuffleKind::Down,
                               static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
  return ::nnlab::sim::shuffle("__shfl_xor_sync", mask, var, ::nnlab::sim::ShuffleKind::Xor, laneMask, width);
}
// Waits until every named lane that has not exited arrived; orders their shared-memory
// accesses as a barrier of the warp (a shuffle does not).
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::nnlab::sim::syncwarp(mask); }

// Atomics: the blocks of a grid run on several CPU threads at once, so these are real
// atomic read-modify-writes (sequentially consistent, stronger than CUDA's relaxed ones).
template <typename T>
T atomicAdd(T* address, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    T old;
    __atomic_load(address, &old, __ATOMIC_SEQ_CST);
    T sum = old + value;
    while (!__atomic_compare_exchange(address, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) sum = old + value;
    return old;
  } else {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
  }
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value, whether or not it was replaced
}
template <typename T>
T atomicExch(T* address, T value) {
  return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicMax(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (old < value &&
         !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (old > value &&
         !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

// Device math: CUDA's integer min/max overloads and the bit casts.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float __int_as_float(int bits) {
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}
inline int __float_as_int(float f) {
  int bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  return bits;
}
