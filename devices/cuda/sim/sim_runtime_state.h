// What the simulator's runtime files (sim_runtime.cpp, sim_streams.cpp) share beyond sim.h.
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace nnlab::sim {

// `error` unless the context already holds a sticky error, which every call then returns.
cudaError_t sticky_or(cudaError_t error);
// Records `detail` as the diagnostic and `error` as the last error; returns sticky_or(error).
cudaError_t fail_call(cudaError_t error, std::string detail);

bool is_stream(cudaStream_t stream);
void drain(cudaStream_t stream);  // waits until everything queued on the stream has run
void drain_all();                 // ... on every stream (cudaDeviceSynchronize)

// A GPU keeps float32 denormals unless built with -ftz; nnlab's CPU threads flush them
// (devices/cpu/threads.h). The simulator's own threads keep them, as the GPU does.
void keep_denormals_on_this_thread();

}  // namespace nnlab::sim
