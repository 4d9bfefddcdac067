// Which cuDNN convolution algorithm nnlab runs, picked from cudnnFind*AlgorithmEx's timed
// results (with --deterministic, cudnnGet*Algorithm_v7's ranked ones): pure host logic over
// cuDNN's result structs, in a header of its own so the GPU test executable checks it on
// made-up result arrays (on the simulator, without a GPU).
#pragma once
#include <cudnn.h>

#include <cstddef>

#include "core/error.h"
#include "devices/backend.h"

namespace nnlab::cuda {

inline bool is_winograd_or_fft(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING;
}
inline bool is_winograd_or_fft(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING;
}
inline bool is_winograd_or_fft(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING;
}

// cuDNN's non-fused Winograd algorithms are never picked: on an H100 with cuDNN 9.14 they missed
// the CPU's float32 result by 8–675× the parity tolerance on 5 × 5 filters, in all three
// directions (up to 2% of an output), and by 2× on a 3 × 3 forward (the sweep in
// tests/gpu/test_gpu_cudnn_algorithms.cpp); the fused Winograd and the FFTs stayed within it.
inline bool is_inaccurate(cudnnConvolutionFwdAlgo_t a) { return a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED; }
inline bool is_inaccurate(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
inline bool is_inaccurate(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first candidate (cuDNN sorts them fastest first) that the math mode allows:
// never an inaccurate one, strict float32 unless `tf32`, and with `deterministic` only
// deterministic algorithms that are neither Winograd nor FFT. Throws, naming the geometry, when none qualifies.
template <typename Perf>
const Perf& pick_algorithm(const Perf* perf, int count, size_t workspace, bool tf32, bool deterministic,
                           const char* direction, const Conv2dGeometry& g) {
  for (int i = 0; i < count; ++i) {
    const Perf& a = perf[i];
    if (a.status != CUDNN_STATUS_SUCCESS || a.memory > workspace || is_inaccurate(a.algo)) continue;
    // Strict: FMA math only. cuDNN may report a plain algorithm as DEFAULT_MATH; it is
    // accepted and then pinned to FMA math (see math_for), which rules TF32 out.
    if (!tf32 && a.mathType != CUDNN_FMA_MATH && a.mathType != CUDNN_DEFAULT_MATH) continue;
    if (deterministic && (a.determinism != CUDNN_DETERMINISTIC || is_winograd_or_fft(a.algo))) continue;
    return a;
  }
  fail("conv2d ", direction, " on CUDA: cuDNN offers no ", tf32 ? "" : "strict float32 (FMA) ",
       deterministic ? "deterministic " : "", "algorithm for x (", g.n, ", ", g.c, ", ", g.h, ", ", g.w, "), w (", g.k,
       ", ", g.c, ", ", g.r, ", ", g.s, "), stride (", g.stride_h, ", ", g.stride_w, "), pad (", g.pad_h, ", ", g.pad_w,
       ") within ", workspace >> 20, " MiB of workspace; try --math tf32 or without --deterministic");
}

}  // namespace nnlab::cuda
