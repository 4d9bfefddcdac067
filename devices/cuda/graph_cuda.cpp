// A training step as one CUDA graph: the step's kernels, copies and library calls are
// recorded once by stream capture and replayed with one cudaGraphLaunch, so a small model's
// step costs one launch from the host instead of dozens.
//
// What makes a replay correct (the trainer's side is in apps/step_graph.cpp):
// - Addresses: a replay reads and writes exactly the memory the captured step did. The
//   caching allocator gives the capture a private pool, so no tensor made between replays
//   can land on a block the graph still uses (core/allocator.h).
// - No host in the loop: a read-back or a host-to-device upload inside the step is refused
//   here with a message; a synchronisation is refused by CUDA itself (the capture becomes
//   invalid and cudaStreamEndCapture says so).
// - Scalars: kernel arguments are frozen at capture. Whatever changes from step to step
//   (the batch, a learning-rate schedule, a dropout seed) must reach the kernels through
//   device memory, or stay outside the graph.
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#ifdef NNLAB_CUDA_SIMULATOR
#include "devices/cuda/sim/sim.h"
#endif

namespace nnlab {

namespace {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(cuda::Context& c, cudaGraphExec_t exec, int pool, size_t nodes)
      : c_(c), exec_(exec), pool_(pool), nodes_(nodes) {}
  ~CudaStepGraph() override {
    // A launch may still be running: the pool's blocks go back to the cache only after it.
    cudaStreamSynchronize(c_.stream);
    cudaGraphExecDestroy(exec_);
    c_.allocator->release_pool(pool_);
  }
  void replay() override { NNLAB_CUDA_CHECK(cudaGraphLaunch(exec_, c_.stream)); }
  size_t nodes() const override { return nodes_; }
  size_t pool_bytes() const override { return c_.allocator->pool_bytes(pool_); }

 private:
  cuda::Context& c_;
  cudaGraphExec_t exec_;
  int pool_;
  size_t nodes_;
};

}  // namespace

std::unique_ptr<StepGraph> CudaBackend::capture(const std::function<void()>& work) {
  cuda::Context& c = *ctx_;
  NNLAB_CHECK(!c.capturing, "capture: a CUDA graph capture is under way already");
  if (!c.cublas_workspace) {
    // 32 MiB, what NVIDIA's cuBLAS documentation recommends for Hopper; the simulator checks it only.
    constexpr size_t kCublasWorkspace = size_t(32) << 20;
    NNLAB_CUDA_CHECK(cudaMalloc(&c.cublas_workspace, kCublasWorkspace));
    NNLAB_CUBLAS_CHECK(cublasSetWorkspace(c.cublas, c.cublas_workspace, kCublasWorkspace));
  }
  // Relaxed: the caching allocator may still need a fresh cudaMalloc during the capture (the
  // first capture of a larger step); synchronising calls stay refused in every mode.
  NNLAB_CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeRelaxed));
  const int pool = c.allocator->begin_capture_pool();
  c.capturing = true;
  cudaGraph_t graph = nullptr;
  const auto end_capture = [&]() {
    c.capturing = false;
    c.allocator->end_capture_pool();
    return cudaStreamEndCapture(c.stream, &graph);
  };
  try {
    work();
  } catch (...) {
    end_capture();
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's own error is not the one to report
    c.allocator->release_pool(pool);
    throw;
  }
  const cudaError_t ended = end_capture();
  if (ended != cudaSuccess) {
    cudaGetLastError();
    c.allocator->release_pool(pool);
    fail("capturing the step as a CUDA graph failed: ", cudaGetErrorString(ended), " (", cudaGetErrorName(ended), ")",
         cuda::simulator_detail(), "; run with --cuda-graphs off");
  }
  size_t nodes = 0;
  NNLAB_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    c.allocator->release_pool(pool);
    NNLAB_CUDA_CHECK(made);
  }
  return std::make_unique<CudaStepGraph>(c, exec, pool, nodes);
}

// The simulator counts every submission and host wait (sim.h); a GPU's driver keeps no such
// count that nnlab could read without a profiler.
bool CudaBackend::device_counts(DeviceCounts* counts) const {
#ifdef NNLAB_CUDA_SIMULATOR
  const sim::SubmissionCounts c = sim::submission_counts();
  counts->submissions = c.submissions;
  counts->host_waits = c.host_waits;
  return true;
#else
  (void)counts;
  return false;
#endif
}

}  // namespace nnlab
