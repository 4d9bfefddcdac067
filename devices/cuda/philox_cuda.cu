// Raw Philox4x32-10 draws computed on the device, for the test that proves the host and the
// device generators give the same 32-bit words (core/philox.h compiles for both).
#include "core/philox.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"

namespace nnlab {

namespace {

// out: (n)   out[i] = philox_u32(seed, purpose, stream, first + i), stored bit for bit
__global__ void philox_fill_u32_kernel(uint32_t* out, int64_t n, uint64_t seed, uint32_t purpose, uint32_t stream,
                                       uint64_t first) {
  NNLAB_GRID_STRIDE(i, n) out[i] = philox_u32(seed, purpose, stream, first + static_cast<uint64_t>(i));
}

}  // namespace

void philox_fill_u32_cuda(Tensor& out, uint64_t seed, uint32_t purpose, uint32_t stream, uint64_t first) {
  NNLAB_CHECK(out.device().is_cuda() && out.dtype() == DType::Int32,
              "philox_fill_u32_cuda: needs an int32 tensor on a CUDA device, got ", out.describe());
  if (!out.numel()) return;
  auto& backend = static_cast<CudaBackend&>(cuda_backend(out.device().index));
  cuda::launch("philox_fill_u32_kernel", philox_fill_u32_kernel, cuda::grid_for(backend.context(), out.numel()),
               cuda::kThreads, backend.context().stream, cuda::ptr<uint32_t>(out), out.numel(), seed, purpose, stream,
               first);
}

}  // namespace nnlab
