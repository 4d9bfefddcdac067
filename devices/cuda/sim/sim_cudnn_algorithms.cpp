// The simulator's cuDNN convolutions as the API sees them: the workspace queries,
// cudnnFind*AlgorithmEx and the three execution functions. Arguments are checked here, on
// the calling thread, as cuDNN documents; the arithmetic (sim_cudnn_conv.cpp) is queued on
// the handle's stream with sim::enqueue, so it runs after the work queued before it.
//
// Statuses follow the cuDNN 9 API reference: inconsistent shapes (channel or batch mismatch,
// a filter larger than the padded image) are CUDNN_STATUS_BAD_PARAM; an output tensor whose
// spatial size differs from cudnnGetConvolution2dForwardOutputDim's is
// CUDNN_STATUS_NOT_SUPPORTED, as is a valid algorithm the simulator does not implement (a
// value outside the enum is BAD_PARAM). Where the reference names no status, the choice is
// said next to the check. Every failure leaves a diagnostic naming the argument.
// Limits of the simulator (NOT_SUPPORTED): float32 data, or bf16 data with float32 compute
// (PSEUDO_BFLOAT16), packed NCHW tensors, one group.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <cudnn.h>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_cudnn_internal.h"

namespace {

using nnlab::sim::dnn::ConvGeometry;
using nnlab::sim::dnn::Direction;
using nnlab::sim::dnn::fail;

std::string dims(int64_t a, int64_t b, int64_t c, int64_t d) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " + std::to_string(d) + ")";
}

// Checks x, w, conv (and y when given) against each other and fills the geometry.
cudnnStatus_t geometry(const char* call, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                       const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, ConvGeometry* g) {
  if (!x || !w || !conv || !x->set || !w->set || !conv->set)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "a descriptor is null or was never set");
  if (x->type != w->type || (y && y->type != x->type))
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the tensors' data types differ");
  if ((x->type != CUDNN_DATA_FLOAT && x->type != CUDNN_DATA_BFLOAT16) || conv->compute != CUDNN_DATA_FLOAT)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                "the simulator convolves float32 or bf16 data, in float32 (the convolution's compute type)");
  if (!x->packed() || (y && !y->packed()))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the simulator convolves packed NCHW tensors only");
  if (x->c != w->c)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "x has " + std::to_string(x->c) + " channels, the filter " +
                                                  std::to_string(w->c));
  g->n = x->n, g->c = x->c, g->h = x->h, g->w = x->w, g->k = w->k, g->r = w->r, g->s = w->s;
  g->pad_h = conv->pad_h, g->pad_w = conv->pad_w, g->stride_h = conv->u, g->stride_w = conv->v;
  g->dil_h = conv->dil_h, g->dil_w = conv->dil_w, g->flip = conv->mode == CUDNN_CONVOLUTION;
  g->bf16 = x->type == CUDNN_DATA_BFLOAT16;
  g->p = nnlab::sim::dnn::conv_output_size(g->h, g->pad_h, g->r, g->dil_h, g->stride_h);
  g->q = nnlab::sim::dnn::conv_output_size(g->w, g->pad_w, g->s, g->dil_w, g->stride_w);
  if (g->p <= 0 || g->q <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the dilated filter is larger than the padded image");
  if (!y) return CUDNN_STATUS_SUCCESS;
  if (y->n != x->n || y->c != w->k)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the output tensor " + dims(y->n, y->c, y->h, y->w) +
                                                  " must have " + std::to_string(x->n) + " images of " +
                                                  std::to_string(w->k) + " channels");
  if (y->h != g->p || y->w != g->q)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the output tensor " + dims(y->n, y->c, y->h, y->w) +
                                                      " is not the convolution's " + dims(g->n, g->k, g->p, g->q));
  return CUDNN_STATUS_SUCCESS;
}

constexpr int algo_count(Direction dir) {
  switch (dir) {
    case Direction::Forward: return int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    case Direction::BackwardData: return int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    case Direction::BackwardFilter: return int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  }
  return 0;
}

// The checks every convolution entry point shares: handle, shapes, algorithm.
cudnnStatus_t prepare(const char* call, Direction dir, cudnnHandle_t handle, const cudnnTensorStruct* x,
                      const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                      int algo, ConvGeometry* g, size_t* workspace) {
  if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, call, "the handle is null");
  const cudnnStatus_t st = geometry(call, x, w, conv, y, g);
  if (st != CUDNN_STATUS_SUCCESS || algo < 0) return st;
  if (algo >= algo_count(dir))
    return fail(CUDNN_STATUS_BAD_PARAM, call, "algorithm " + std::to_string(algo) + " is not a valid enumerant");
  if (!nnlab::sim::dnn::conv_workspace_bytes(dir, algo, *g, workspace))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                "algorithm " + std::to_string(algo) +
                    " is not one of the simulator's (Find offers only those it runs); "
                    "cuDNN answers NOT_SUPPORTED the same way for an algorithm a shape does not support");
  return CUDNN_STATUS_SUCCESS;
}

// The three operands of a direction, in conv_run's order, with their names and sizes.
struct Operands {
  const void* in0;
  const void* in1;
  void* out;
  const char* names[3];
};

size_t operand_bytes(Direction dir, const ConvGeometry& g, int i) {
  return nnlab::sim::dnn::operand_elements(dir, g, i) * (g.bf16 ? sizeof(uint16_t) : sizeof(float));
}

// Device memory for every operand (and `need` bytes of workspace). Host memory is refused
// with BAD_PARAM before anything runs; the real library cannot tell and the GPU would fault
// later with an illegal address, far from the call.
cudnnStatus_t check_memory(const char* call, Direction dir, const ConvGeometry& g, const Operands& ops,
                           const void* workspace, size_t need) {
  const void* ptrs[3] = {ops.in0, ops.in1, ops.out};
  for (int i = 0; i < 3; ++i) {
    if (!ptrs[i]) return fail(CUDNN_STATUS_BAD_PARAM, call, std::string(ops.names[i]) + " is null");
    if (!nnlab::sim::check_device_access(call, ops.names[i], ptrs[i], operand_bytes(dir, g, i)))
      return CUDNN_STATUS_BAD_PARAM;
  }
  if (need > 0 && !nnlab::sim::check_device_access(call, "workSpace", workspace, need)) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

// cudnnConvolutionForward/BackwardData/BackwardFilter.
cudnnStatus_t convolve(const char* call, Direction dir, cudnnHandle_t handle, const void* alpha, const void* beta,
                       const cudnnTensorStruct* x, const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                       const cudnnTensorStruct* y, int algo, void* workspace, size_t workspace_bytes,
                       const Operands& ops) {
  ConvGeometry g;
  size_t need = 0;
  cudnnStatus_t st = prepare(call, dir, handle, x, w, conv, y, algo, &g, &need);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (algo < 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "algorithm " + std::to_string(algo) + " is negative");
  if (!alpha || !beta) return fail(CUDNN_STATUS_BAD_PARAM, call, "alpha or beta is null");
  // Too little workspace: the reference names no status; cuDNN 9 treats it as a bad
  // parameter, and so does the simulator.
  if (workspace_bytes < need)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "algorithm " + std::to_string(algo) + " needs " + std::to_string(need) +
                                                  " bytes of workspace, got " + std::to_string(workspace_bytes));
  if ((st = check_memory(call, dir, g, ops, workspace, need)) != CUDNN_STATUS_SUCCESS) return st;
  // Scaling factors are host memory, read now (cuDNN's rule).
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const void *in0 = ops.in0, *in1 = ops.in1;
  void* out = ops.out;
  float* ws = static_cast<float*>(workspace);
  const int threads = nnlab::sim::worker_threads();
  const std::string name = call;
  nnlab::sim::enqueue(handle->stream, "cudnn", call, [=] {
    try {
      nnlab::sim::dnn::conv_run_stored(dir, algo, g, in0, in1, out, a, b, ws, threads);
    } catch (const std::exception& e) {
      nnlab::sim::raise_sticky_error(cudaErrorLaunchFailure, name + " failed while running: " + e.what());
    }
  });
  return CUDNN_STATUS_SUCCESS;
}

// cudnnFind*AlgorithmEx: times every implemented (algorithm, math type) pair on the caller's
// buffers and returns them fastest first, failures last.
//
// Find is synchronous on a GPU too. On a stream-ordered simulator the inputs may still be
// being written by work queued before the call, so the trials cannot run on the calling
// thread at once: they are queued on the handle's stream like any other call (so they run
// after that work and see its results), and Find then waits for the stream. The trial
// results travel back through a shared record that the stream's thread fills before the
// synchronisation returns. Each trial's time is the arithmetic alone, not the queueing.
template <typename Perf, typename Algo>
cudnnStatus_t find(const char* call, Direction dir, cudnnHandle_t handle, const cudnnTensorStruct* x,
                   const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                   const Operands& ops, int requested, int* returned, Perf* perf, void* workspace,
                   size_t workspace_bytes) {
  ConvGeometry g;
  size_t need = 0;
  cudnnStatus_t st = prepare(call, dir, handle, x, w, conv, y, -1, &g, &need);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (requested <= 0 || !returned || !perf)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "requestedAlgoCount <= 0, or returnedAlgoCount/perfResults is null");
  if ((st = check_memory(call, dir, g, ops, workspace, workspace_bytes)) != CUDNN_STATUS_SUCCESS) return st;

  struct Trial {
    int algo;
    cudnnMathType_t math;
    cudnnStatus_t status;
    float ms;
    size_t memory;
  };
  auto trials = std::make_shared<std::vector<Trial>>();
  const void *in0 = ops.in0, *in1 = ops.in1;
  void* out = ops.out;
  float* ws = static_cast<float*>(workspace);
  const int threads = nnlab::sim::worker_threads();
  nnlab::sim::enqueue(handle->stream, "cudnn", call, [=] {
    const int* algos = nnlab::sim::dnn::implemented_algorithms(dir);
    for (int i = 0; i < nnlab::sim::dnn::kAlgorithmsPerDirection; ++i)
      for (cudnnMathType_t math : {CUDNN_DEFAULT_MATH, CUDNN_FMA_MATH}) {
        Trial t{algos[i], math, CUDNN_STATUS_SUCCESS, -1.0f, 0};
        if (!nnlab::sim::dnn::conv_workspace_bytes(dir, t.algo, g, &t.memory)) {
          t.status = CUDNN_STATUS_NOT_SUPPORTED;
        } else if (t.memory > workspace_bytes) {
          t.status = CUDNN_STATUS_ALLOC_FAILED;  // the documented status for too little workspace
        } else {
          const auto start = std::chrono::steady_clock::now();
          try {
            nnlab::sim::dnn::conv_run_stored(dir, t.algo, g, in0, in1, out, 1.0f, 0.0f, ws, threads);
            t.ms = std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - start).count();
          } catch (const std::bad_alloc&) {
            t.status = CUDNN_STATUS_ALLOC_FAILED;
          } catch (const std::exception&) {
            t.status = CUDNN_STATUS_INTERNAL_ERROR;
          }
        }
        trials->push_back(t);
      }
  });
  if (cudaStreamSynchronize(handle->stream) != cudaSuccess || trials->empty())
    return fail(CUDNN_STATUS_EXECUTION_FAILED, call, "the stream failed before the trials could run");
  std::stable_sort(trials->begin(), trials->end(), [](const Trial& a, const Trial& b) {
    const bool ok_a = a.status == CUDNN_STATUS_SUCCESS, ok_b = b.status == CUDNN_STATUS_SUCCESS;
    return ok_a != ok_b ? ok_a : (ok_a && a.ms < b.ms);
  });
  const int count = std::min<int>(requested, int(trials->size()));
  for (int i = 0; i < count; ++i) {
    const Trial& t = (*trials)[size_t(i)];
    perf[i] = Perf{};
    perf[i].algo = static_cast<Algo>(t.algo);
    perf[i].status = t.status;
    perf[i].time = t.ms;
    perf[i].memory = t.memory;
    perf[i].determinism = CUDNN_DETERMINISTIC;  // fixed summation order (sim_cudnn_conv.cpp)
    perf[i].mathType = t.math;
  }
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

// cudnnGetConvolution*Algorithm_v7: cuDNN's heuristics, which rank the algorithms by the
// geometry alone, without running anything, so the same call always gives the same answer.
// The simulator's rule: the batched algorithm (one BLAS product for the whole batch) before
// the per-image one, each with DEFAULT and then FMA math; those it cannot run come last.
template <typename Perf, typename Algo>
cudnnStatus_t heuristic(const char* call, Direction dir, cudnnHandle_t handle, const cudnnTensorStruct* x,
                        const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                        int requested, int* returned, Perf* perf) {
  ConvGeometry g;
  size_t need = 0;
  const cudnnStatus_t st = prepare(call, dir, handle, x, w, conv, y, -1, &g, &need);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (requested <= 0 || !returned || !perf)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "requestedAlgoCount <= 0, or returnedAlgoCount/perfResults is null");
  const int* algos = nnlab::sim::dnn::implemented_algorithms(dir);
  std::vector<Perf> ranked;
  for (int i = nnlab::sim::dnn::kAlgorithmsPerDirection - 1; i >= 0; --i)
    for (cudnnMathType_t math : {CUDNN_DEFAULT_MATH, CUDNN_FMA_MATH}) {
      Perf p{};
      p.algo = static_cast<Algo>(algos[i]);
      p.status = nnlab::sim::dnn::conv_workspace_bytes(dir, algos[i], g, &p.memory) ? CUDNN_STATUS_SUCCESS
                                                                                    : CUDNN_STATUS_NOT_SUPPORTED;
      p.time = -1.0f;  // nothing was timed
      p.determinism = CUDNN_DETERMINISTIC;
      p.mathType = math;
      ranked.push_back(p);
    }
  std::stable_partition(ranked.begin(), ranked.end(), [](const Perf& p) { return p.status == CUDNN_STATUS_SUCCESS; });
  *returned = std::min<int>(requested, int(ranked.size()));
  std::copy(ranked.begin(), ranked.begin() + *returned, perf);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t workspace_size(const char* call, Direction dir, cudnnHandle_t handle, const cudnnTensorStruct* x,
                             const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                             const cudnnTensorStruct* y, int algo, size_t* bytes) {
  if (!bytes) return fail(CUDNN_STATUS_BAD_PARAM, call, "sizeInBytes is null");
  if (algo < 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "algorithm " + std::to_string(algo) + " is negative");
  ConvGeometry g;
  return prepare(call, dir, handle, x, w, conv, y, algo, &g, bytes);
}

cudnnStatus_t max_count(cudnnHandle_t handle, int* count) {
  if (!handle || !count) return CUDNN_STATUS_BAD_PARAM;
  *count = nnlab::sim::dnn::kAlgorithmsPerDirection * 2;  // each algorithm with DEFAULT and FMA math
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace


extern "C" {

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count(handle, count);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count(handle, count);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count(handle, count);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", Direction::Forward, handle, xDesc, wDesc,
                        convDesc, yDesc, algo, sizeInBytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", Direction::BackwardData, handle, dxDesc,
                        wDesc, convDesc, dyDesc, algo, sizeInBytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                             const cudnnTensorDescriptor_t dyDesc,
                                                             const cudnnConvolutionDescriptor_t convDesc,
                                                             const cudnnFilterDescriptor_t gradDesc,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", Direction::BackwardFilter, handle, xDesc,
                        gradDesc, convDesc, dyDesc, algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                     const cudnnFilterDescriptor_t wDesc,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount,
                                                     int* returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return heuristic<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnGetConvolutionForwardAlgorithm_v7", Direction::Forward, handle, xDesc, wDesc, convDesc, yDesc,
      requestedAlgoCount, returnedAlgoCount, perfResults);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                          const cudnnTensorDescriptor_t dyDesc,
                                                          const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t dxDesc,
                                                          const int requestedAlgoCount, int* returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return heuristic<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", Direction::BackwardData, handle, dxDesc, wDesc, convDesc, dyDesc,
      requestedAlgoCount, returnedAlgoCount, perfResults);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                            const cudnnTensorDescriptor_t dyDesc,
                                                            const cudnnConvolutionDescriptor_t convDesc,
                                                            const cudnnFilterDescriptor_t dwDesc,
                                                            const int requestedAlgoCount, int* returnedAlgoCount,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return heuristic<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", Direction::BackwardFilter, handle, xDesc, dwDesc, convDesc,
      dyDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnFilterDescriptor_t wDesc,
    const void* w, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc, void* y,
    const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSizeInBytes) {
  return find<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnFindConvolutionForwardAlgorithmEx", Direction::Forward, handle, xDesc, wDesc, convDesc, yDesc,
      Operands{x, w, y, {"x", "w", "y"}}, requestedAlgoCount, returnedAlgoCount, perfResults, workSpace,
      workSpaceSizeInBytes);
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnTensorDescriptor_t dyDesc,
    const void* dy, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSizeInBytes) {
  return find<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnFindConvolutionBackwardDataAlgorithmEx", Direction::BackwardData, handle, dxDesc, wDesc, convDesc, dyDesc,
      Operands{w, dy, dx, {"w", "dy", "dx"}}, requestedAlgoCount, returnedAlgoCount, perfResults, workSpace,
      workSpaceSizeInBytes);
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t dyDesc,
    const void* y, const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void* dw,
    const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSizeInBytes) {
  return find<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnFindConvolutionBackwardFilterAlgorithmEx", Direction::BackwardFilter, handle, xDesc, dwDesc, convDesc,
      dyDesc, Operands{x, y, dw, {"x", "dy", "dw"}}, requestedAlgoCount, returnedAlgoCount, perfResults, workSpace,
      workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  return convolve("cudnnConvolutionForward", Direction::Forward, handle, alpha, beta, xDesc, wDesc, convDesc, yDesc,
                  algo, workSpace, workSpaceSizeInBytes, Operands{x, w, y, {"x", "w", "y"}});
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  return convolve("cudnnConvolutionBackwardData", Direction::BackwardData, handle, alpha, beta, dxDesc, wDesc,
                  convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes, Operands{w, dy, dx, {"w", "dy", "dx"}});
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace,
                                             size_t workSpaceSizeInBytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  return convolve("cudnnConvolutionBackwardFilter", Direction::BackwardFilter, handle, alpha, beta, xDesc, dwDesc,
                  convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes, Operands{x, dy, dw, {"x", "dy", "dw"}});
}

}  // extern "C"
