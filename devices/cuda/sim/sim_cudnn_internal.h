// What the parts of the simulator's cuDNN share (internal to devices/cuda/sim):
// - the descriptor objects behind cuDNN's opaque handles (set in sim_cudnn.cpp, read by the
//   convolution entry points in sim_cudnn_algorithms.cpp);
// - one checked convolution geometry and the algorithms the arithmetic (sim_cudnn_conv.cpp)
//   implements for each direction.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

// n, c, h, w with element strides; cudnnSetTensor4dDescriptor sets the packed NCHW ones.
struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0, ns = 0, cs = 0, hs = 0, ws = 0;
  bool packed() const { return ws == 1 && hs == w && cs == h * w && ns == c * h * w; }
  // Elements from the first to one past the last (strides may leave gaps).
  size_t span() const {
    return 1 + size_t(n - 1) * ns + size_t(c - 1) * cs + size_t(h - 1) * hs + size_t(w - 1) * ws;
  }
};

// k output channels, c input channels, r × s taps; packed KCRS.
struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int k = 0, c = 0, r = 0, s = 0;
};

struct cudnnConvolutionStruct {
  bool set = false;
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace nnlab::sim::dnn {

// x: (n, c, h, w)  w: (k, c, r, s)  y: (n, k, p, q), packed NCHW, one group; the data float32
// or bf16 (computed in float32 either way).
// p = 1 + (h + 2·pad_h − ((r − 1)·dil_h + 1)) / stride_h, and likewise q.
struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 0, r = 0, s = 0;
  int64_t p = 0, q = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  bool flip = false;  // CUDNN_CONVOLUTION: the filter is applied rotated by 180°
  bool bf16 = false;  // CUDNN_DATA_BFLOAT16 tensors (the compute type is float32 either way)

  int64_t crs() const { return c * r * s; }
  int64_t pq() const { return p * q; }
  int64_t chw() const { return c * h * w; }
  int64_t kpq() const { return k * p * q; }
};

// The documented output size 1 + (in + 2·pad − ((filter − 1)·dilation + 1)) / stride;
// 0 when the dilated filter does not fit in the padded input.
inline int64_t conv_output_size(int64_t in, int64_t pad, int64_t filter, int64_t dilation, int64_t stride) {
  const int64_t span = in + 2 * pad - ((filter - 1) * dilation + 1);
  return span < 0 ? 0 : 1 + span / stride;
}

// Records "call: why" as the diagnostic (sim::set_diagnostic) and returns status.
cudnnStatus_t fail(cudnnStatus_t status, const char* call, const std::string& why);

enum class Direction { Forward, BackwardData, BackwardFilter };

// The algorithms implemented per direction, in the order Find tries them (cuDNN's enum
// values: forward IMPLICIT_GEMM = 0 and GEMM = 2, backward data ALGO_0/ALGO_1 = 0/1,
// backward filter ALGO_0/ALGO_1 = 0/1).
constexpr int kAlgorithmsPerDirection = 2;
const int* implemented_algorithms(Direction dir);

// The workspace bytes algorithm `algo` needs for g; false when the simulator does not
// implement it (or its matrices would pass BLAS's 32-bit dimensions).
bool conv_workspace_bytes(Direction dir, int algo, const ConvGeometry& g, size_t* bytes);

// Runs algorithm `algo` (one conv_workspace_bytes accepted) on the calling thread:
//   Forward:        in0 = x,  in1 = w,  out = y
//   BackwardData:   in0 = w,  in1 = dy, out = dx
//   BackwardFilter: in0 = x,  in1 = dy, out = dw
// out = alpha · result + beta · out; beta == 0 never reads out (it may hold NaN).
// `workspace` holds at least conv_workspace_bytes; images are spread over `threads` threads.
void conv_run(Direction dir, int algo, const ConvGeometry& g, const float* in0, const float* in1, float* out,
              float alpha, float beta, float* workspace, int threads);

// The element count of operand i (0, 1: the inputs, 2: the output) in conv_run's order.
size_t operand_elements(Direction dir, const ConvGeometry& g, int i);

// conv_run on the operands as they are stored: float32, or bf16 (g.bf16) widened to float32
// copies, with out rounded to bf16 once at the end.
void conv_run_stored(Direction dir, int algo, const ConvGeometry& g, const void* in0, const void* in1, void* out,
                     float alpha, float beta, float* workspace, int threads);

}  // namespace nnlab::sim::dnn
