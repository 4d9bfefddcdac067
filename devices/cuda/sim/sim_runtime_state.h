// What the simulator's runtime files (sim_runtime.cpp, sim_streams.cpp, sim_devices.cpp,
// sim_nccl.cpp) share beyond sim.h.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace nnlab::sim {

// `error` unless the context already holds a sticky error, which every call then returns.
cudaError_t sticky_or(cudaError_t error);
// Records `detail` as the diagnostic and `error` as the last error; returns sticky_or(error).
cudaError_t fail_call(cudaError_t error, std::string detail);

// A positive whole number from the environment variable `name`, or 0 when it is unset. A value
// that is not one is the user's mistake and says so (a silent 0 would read as "no memory").
long long env_count(const char* name);
// Each simulated device's memory in bytes (NNLAB_SIM_MEMORY_MB, or a share of half the machine's).
size_t device_memory_bytes();

bool is_stream(cudaStream_t stream);
void drain(cudaStream_t stream);  // waits until everything queued on the stream has run
void drain_all();                 // ... on every stream of the current device (cudaDeviceSynchronize)

// What a stream capture recorded: the work items in stream order (sim_graphs.cpp makes a
// graph of it; launching the graph queues them again, with the arguments they were recorded with).
struct CapturedWork {
  std::vector<std::function<void()>> nodes;
  // The nodes a GPU's graph would hold: the program's kernels, copies and library calls, not
  // the simulator's own bookkeeping (enqueue's counted = false: ASan's poisoning of freed
  // blocks, the parts of one library call). cudaGraphGetNodes reports these.
  size_t program_nodes = 0;
};
cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t end_capture(cudaStream_t stream, std::shared_ptr<CapturedWork>* work);
cudaStreamCaptureStatus capture_status(cudaStream_t stream);
// A call that would wait for work being captured (stream; nullptr: any stream), or an unsafe
// call a Global/ThreadLocal capture forbids (unsafe_only): invalidates the capture and returns
// cudaErrorStreamCaptureUnsupported; cudaSuccess when no capture is affected.
cudaError_t refuse_during_capture(const char* call, cudaStream_t stream, bool unsafe_only);

// A GPU keeps float32 denormals unless built with -ftz; nnlab's CPU threads flush them
// (devices/cpu/threads.h). The simulator's own threads keep them, as the GPU does.
void keep_denormals_on_this_thread();

}  // namespace nnlab::sim
