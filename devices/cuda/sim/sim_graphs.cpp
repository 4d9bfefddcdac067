// CUDA graphs on the simulator: stream capture records a stream's work (sim_streams.cpp's
// enqueue hands it to the capture instead of the stream's queue), a graph is that record,
// and launching the instantiated graph queues the recorded work again on a stream.
//
// What the record holds is what a GPU's graph holds: every kernel with the arguments it was
// launched with, every copy with its addresses, every cuBLAS and cuDNN call with its
// pointers and scalars. So a replay reads the same addresses and the same scalar arguments
// as the captured step did: a value the host changes afterwards (a learning rate passed by
// value, a dropout seed, a step count) is NOT seen by the replay, exactly the mistake a real
// graph makes, and a test on the simulator sees it too.
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_runtime_state.h"

struct CUgraph_st {
  std::shared_ptr<const nnlab::sim::CapturedWork> work;
};

struct CUgraphExec_st {
  std::shared_ptr<const nnlab::sim::CapturedWork> work;  // shared: a graph may be destroyed after instantiation
};

namespace {

std::mutex g_graphs_mutex;
std::set<const void*>& live_handles() {
  static auto* handles = new std::set<const void*>();  // never destroyed: used at exit
  return *handles;
}

bool is_live(const void* handle) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  return handle && live_handles().count(handle) != 0;
}

template <typename Handle>
Handle* remember(Handle* h) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  live_handles().insert(h);
  return h;
}

bool forget(const void* handle) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  return live_handles().erase(handle) != 0;
}

}  // namespace

using nnlab::sim::fail_call;
using nnlab::sim::sticky_or;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return nnlab::sim::begin_capture(stream, mode);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!graph) return fail_call(cudaErrorInvalidValue, "cudaStreamEndCapture: graph is null");
  *graph = nullptr;
  std::shared_ptr<nnlab::sim::CapturedWork> work;
  if (const cudaError_t e = nnlab::sim::end_capture(stream, &work)) return e;
  *graph = remember(new CUgraph_st{std::move(work)});
  return sticky_or(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return fail_call(cudaErrorInvalidValue, "cudaStreamIsCapturing: status is null");
  if (!nnlab::sim::is_stream(stream)) return fail_call(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing: not a stream");
  *status = nnlab::sim::capture_status(stream);
  return sticky_or(cudaSuccess);
}

// Every recorded item of the program's is one node: a kernel, a copy, a memset, or one library
// call (on a GPU a cuBLAS or cuDNN call may add several kernel nodes; the simulator counts it
// once). The simulator's own bookkeeping recorded with them is not counted.
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!is_live(graph) || !count) return fail_call(cudaErrorInvalidValue, "cudaGraphGetNodes: not a graph");
  if (nodes)
    return fail_call(cudaErrorInvalidValue, "cudaGraphGetNodes: the simulator counts nodes only (pass nodes = null)");
  *count = graph->work->program_nodes;
  return sticky_or(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec) return fail_call(cudaErrorInvalidValue, "cudaGraphInstantiate: exec is null");
  if (!is_live(graph)) return fail_call(cudaErrorInvalidValue, "cudaGraphInstantiate: not a graph");
  *exec = remember(new CUgraphExec_st{graph->work});
  return sticky_or(cudaSuccess);
}

// The recorded work runs as one item of the stream's queue: after everything queued before
// the launch, before anything queued after it, as a graph launch is ordered on a GPU.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (const cudaError_t sticky = sticky_or(cudaSuccess); sticky != cudaSuccess) return sticky;
  if (!is_live(exec)) return fail_call(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: not an instantiated graph");
  if (!nnlab::sim::is_stream(stream)) return fail_call(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: not a stream");
  std::shared_ptr<const nnlab::sim::CapturedWork> work = exec->work;
  nnlab::sim::enqueue(stream, "graph", "cudaGraphLaunch", [work] {
    for (const auto& node : work->nodes) node();
  });
  return sticky_or(cudaSuccess);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!forget(exec)) return fail_call(cudaErrorInvalidValue, "cudaGraphExecDestroy: not an instantiated graph");
  delete exec;  // queued launches hold the work themselves
  return sticky_or(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!forget(graph)) return fail_call(cudaErrorInvalidValue, "cudaGraphDestroy: not a graph");
  delete graph;
  return sticky_or(cudaSuccess);
}
