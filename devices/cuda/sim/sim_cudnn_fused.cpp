// The simulator's fused convolution, cudnnConvolutionBiasActivationForward:
//   y = act(alpha1 · conv(x, w) + alpha2 · z + bias)      bias: (1, K, 1, 1), z and y alike
// with the activation descriptor that names act. Checked as cuDNN 9 documents it: the
// activation is RELU or IDENTITY, and IDENTITY runs only with
// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM (NOT_SUPPORTED otherwise); z may be y.
// The convolution runs as cudnnConvolutionForward does (with alpha2·z as its beta term), the
// bias and the activation after it on the same stream; the whole counts as one call.
#include <cmath>
#include <cstring>
#include <string>

#include <cudnn.h>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_cudnn_internal.h"

struct cudnnActivationStruct {
  bool set = false;
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
  double coef = 0.0;
};

namespace {

using nnlab::sim::dnn::fail;

bool same_shape(const cudnnTensorStruct& a, const cudnnTensorStruct& b) {
  return a.type == b.type && a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w && a.ns == b.ns && a.cs == b.cs &&
         a.hs == b.hs && a.ws == b.ws;
}

}  // namespace

extern "C" {

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* activationDesc) {
  if (!activationDesc) return CUDNN_STATUS_BAD_PARAM;
  *activationDesc = new cudnnActivationStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef) {
  const char* call = "cudnnSetActivationDescriptor";
  if (!activationDesc) return fail(CUDNN_STATUS_BAD_PARAM, call, "the descriptor is null");
  if (mode < CUDNN_ACTIVATION_SIGMOID || mode > CUDNN_ACTIVATION_SWISH)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "mode is not a cudnnActivationMode_t");
  if (reluNanOpt != CUDNN_NOT_PROPAGATE_NAN && reluNanOpt != CUDNN_PROPAGATE_NAN)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "reluNanOpt is not a cudnnNanPropagation_t");
  *activationDesc = cudnnActivationStruct{true, mode, reluNanOpt, coef};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t activationDesc) {
  delete activationDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* alpha2,
    const cudnnTensorDescriptor_t zDesc, const void* z, const cudnnTensorDescriptor_t biasDesc, const void* bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void* y) {
  const char* call = "cudnnConvolutionBiasActivationForward";
  if (!handle || !alpha1 || !alpha2 || !zDesc || !biasDesc || !activationDesc || !yDesc || !zDesc->set ||
      !biasDesc->set || !yDesc->set || !activationDesc->set)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the handle, a scale or a descriptor is null or not set");
  const cudnnActivationStruct act = *activationDesc;
  if (act.mode != CUDNN_ACTIVATION_RELU && act.mode != CUDNN_ACTIVATION_IDENTITY)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the activation must be RELU or IDENTITY");
  if (act.mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "IDENTITY runs with IMPLICIT_PRECOMP_GEMM only");
  const cudnnTensorStruct yd = *yDesc, zd = *zDesc, bd = *biasDesc;
  if (!same_shape(zd, yd)) return fail(CUDNN_STATUS_BAD_PARAM, call, "z's descriptor differs from y's");
  if (bd.type != yd.type || bd.n != 1 || bd.c != yd.c || bd.h != 1 || bd.w != 1)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the bias must be (1, " + std::to_string(yd.c) + ", 1, 1) of y's type");
  if (yd.type != CUDNN_DATA_FLOAT)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the simulator fuses float32 tensors only");
  if (!bias || !z || !y) return fail(CUDNN_STATUS_BAD_PARAM, call, "z, the bias or y is null");
  const size_t y_bytes = yd.span() * sizeof(float);
  if (!nnlab::sim::check_device_access(call, "z", z, y_bytes) ||
      !nnlab::sim::check_device_access(call, "bias", bias, size_t(yd.c) * sizeof(float)))
    return CUDNN_STATUS_BAD_PARAM;
  const float a2 = *static_cast<const float*>(alpha2);
  // alpha2·z enters as the convolution's beta term, read from y: z copied there first unless
  // it is y (or unused).
  if (z != y && a2 != 0.0f) {
    if (!nnlab::sim::check_device_access(call, "y", y, y_bytes)) return CUDNN_STATUS_BAD_PARAM;
    nnlab::sim::enqueue(handle->stream, "cudnn", "cudnnConvolutionBiasActivationForward (z)",
                        [=] { std::memcpy(y, z, y_bytes); }, false);
  }
  const cudnnStatus_t st = cudnnConvolutionForward(handle, alpha1, xDesc, x, wDesc, w, convDesc, algo, workSpace,
                                                   workSpaceSizeInBytes, alpha2, yDesc, y);
  if (st != CUDNN_STATUS_SUCCESS) {
    nnlab::sim::set_diagnostic(std::string(call) + " (its convolution): " + nnlab::sim::last_diagnostic());
    return st;
  }
  const bool relu = act.mode == CUDNN_ACTIVATION_RELU, keep_nan = act.nan == CUDNN_PROPAGATE_NAN;
  const auto* b = static_cast<const float*>(bias);
  auto* out = static_cast<float*>(y);
  nnlab::sim::enqueue(handle->stream, "cudnn", "cudnnConvolutionBiasActivationForward (bias, activation)", [=] {
    for (int64_t n = 0; n < yd.n; ++n)
      for (int64_t c = 0; c < yd.c; ++c)
        for (int64_t i = 0; i < yd.h; ++i)
          for (int64_t j = 0; j < yd.w; ++j) {
            float& v = out[n * yd.ns + c * yd.cs + i * yd.hs + j * yd.ws];
            v += b[c];
            // ReLU: max(v, 0); a NaN stays NaN only with CUDNN_PROPAGATE_NAN.
            if (relu && !(v > 0.0f) && !(keep_nan && std::isnan(v))) v = 0.0f;
          }
  }, false);
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
