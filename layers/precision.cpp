#include "layers/precision.h"

#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

DType precision_storage_dtype(const std::string& precision, const char* option) {
  if (precision == "fp32" || precision == "tf32") return DType::Float32;
  if (precision == "bf16") return DType::BFloat16;
  fail(option, ": '", precision, "' is not a precision (fp32, tf32 or bf16)");
}

DType precision_storage_dtype(const std::string& precision, Device device, const char* option) {
  const DType dtype = precision_storage_dtype(precision, option);
  if (dtype != DType::BFloat16) return dtype;
  const std::string obstacle = backend_for(device).bf16_obstacle();
  NNLAB_CHECK(obstacle.empty(), option, " bf16 cannot run here: ", obstacle,
              "; run it there in fp32, or on the CPU (which emulates bf16)");
  return dtype;
}

Tensor compute_copy(const Tensor& param, const Tensor& x) {
  if (!param.defined() || x.dtype() != DType::BFloat16) return param;
  return cast(param, DType::BFloat16);
}

}  // namespace nnlab
