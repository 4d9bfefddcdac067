// What the parts of the CUDA simulator share: where each pointer lives (device memory,
// mapped or pinned host memory, or ordinary host memory the device must not touch), the
// streams' work queues, and the diagnostics that say which call used which pointer wrongly.
// Used by sim_runtime.cpp, sim_threads.cpp, sim_cublas.cpp and sim_cudnn.cpp only.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

namespace nnlab::sim {

enum class MemoryKind {
  Device,      // cudaMalloc: only kernels, cuBLAS, cuDNN and device-side copies may touch it
  MappedHost,  // cudaHostAlloc(..., cudaHostAllocMapped): host memory the device may use too
  PinnedHost,  // cudaMallocHost / cudaHostAlloc without mapping: host memory, fast to copy
};
const char* memory_kind_name(MemoryKind kind);

struct Region {
  const char* base = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Device;
  int device = -1;  // device memory: the device that owns it
};

// The simulated devices: NNLAB_SIM_DEVICES of them (default 1, at most kMaxDevices), each with
// its own memory, streams and peer-access settings, as the GPUs of one machine.
constexpr int kMaxDevices = 16;
int device_count();
// The calling thread's current device (cudaSetDevice is per thread; 0 until set). A stream's
// own thread has its stream's device, so work checked there is checked against that device.
int current_device();
void set_current_device(int device);
// Whether work on `device` may touch memory that `owner` holds: its own memory, or a peer's
// after cudaDeviceEnablePeerAccess(owner) on `device`.
bool device_can_use(int device, int owner);
// The device a stream belongs to (the current device when it was created); for nullptr, the
// calling thread's current device, whose default stream that is.
int stream_device(cudaStream_t stream);

// The registered region that contains p; false for ordinary (pageable) host memory.
bool find_region(const void* p, Region* region);

// Whether the device may access [p, p + bytes): inside one region of mapped host memory, or
// of device memory the current device may use (its own or an enabled peer's). Otherwise records a diagnostic ("cublasSgemm: argument B (0x…) is ordinary host
// memory, not device memory") for last_diagnostic() and returns false. A null p with
// bytes == 0 is allowed.
bool check_device_access(const char* call, const char* what, const void* p, size_t bytes);

// The diagnostic of the last failed check on this thread, and a way to set one; the error
// macros of devices/cuda/cuda_check.h append it to their message on the simulator.
const std::string& last_diagnostic();
void set_diagnostic(std::string text);

// The error cudaGetLastError() returns next on this thread (a failed launch).
void set_launch_error(cudaError_t error);

// Queues `work` on `stream` (nullptr: the default stream); it runs after everything queued on
// the stream before it, on the stream's own CPU thread, unless NNLAB_SIM_SYNC=1 runs every
// call at once on the caller's thread (easier to follow in a debugger).
// `category` and `name` (string literals) label it on the timeline (sim_trace.h): "kernel" and
// the kernel's name, "cublas" and "cublasSgemm", ...
// `counted`: the item is a submission of the program's (a kernel, a copy, a library call, a
// graph launch), not the simulator's own bookkeeping (the allocator's poisoning under ASan).
void enqueue(cudaStream_t stream, const char* category, const char* name, std::function<void()> work,
             bool counted = true);

// What the host asked of the device since the process started: submissions (every kernel,
// copy, memset, cuBLAS or cuDNN call, event record or wait, and graph launch queued; work
// recorded into a graph counts once per launch of the graph) and host waits (calls that
// block the host until queued work has run: stream, event and device synchronisation, a
// synchronous copy, a copy to pageable memory, cudaFree). A cuBLAS or cuDNN call counts once,
// where a GPU may run several kernels for it.
struct SubmissionCounts {
  uint64_t submissions = 0;
  uint64_t host_waits = 0;
};
SubmissionCounts submission_counts();

// A kernel or library call that failed while running (on the stream's thread) makes the
// context unusable, as a GPU fault does: every later runtime call returns `error` with
// `detail` in the diagnostic.
void raise_sticky_error(cudaError_t error, std::string detail);

// For the simulator's own tests only: forgets the sticky error, so one test process can go on
// after a test that faults on purpose. A GPU has no such thing (cudaDeviceReset destroys
// every allocation and stream of the process).
void clear_sticky_error_for_tests();

// The CPU threads that run a grid's blocks: NNLAB_SIM_THREADS, else nnlab's --threads.
int block_threads();
// The OpenMP threads of the cuBLAS/cuDNN stand-ins (nnlab's --threads). Under
// ThreadSanitizer 1: libgomp is not built for ThreadSanitizer, and its barriers would read as
// races; the simulator's own block threads (std::thread) stay parallel there.
int worker_threads();

}  // namespace nnlab::sim
