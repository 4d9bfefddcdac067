#include "devices/gemm_impl.h"

#include <atomic>

#include "core/error.h"

namespace nnlab {

namespace {
std::atomic<GemmImpl> g_gemm_impl{GemmImpl::Cublas};
}

GemmImpl parse_gemm_impl(const std::string& text) {
  if (text == "cublas" || text.empty()) return GemmImpl::Cublas;
  if (text == "naive") return GemmImpl::Naive;
  if (text == "tiled") return GemmImpl::Tiled;
  if (text == "registers") return GemmImpl::Registers;
  fail("--gemm-impl: unknown GEMM '", text,
       "'; choose cublas (the default), naive (one thread per output), tiled (shared-memory tiles) or registers "
       "(each thread a 4×4 block of C)");
}

const char* gemm_impl_name(GemmImpl impl) {
  switch (impl) {
    case GemmImpl::Cublas: return "cublas";
    case GemmImpl::Naive: return "naive";
    case GemmImpl::Tiled: return "tiled";
    case GemmImpl::Registers: return "registers";
  }
  return "cublas";
}

void set_gemm_impl(GemmImpl impl) { g_gemm_impl.store(impl); }
GemmImpl gemm_impl() { return g_gemm_impl.load(); }

void check_gemm_impl(GemmImpl impl, Device device) {
  NNLAB_CHECK(impl == GemmImpl::Cublas || device.kind == DeviceKind::CUDA, "--gemm-impl ", gemm_impl_name(impl),
              " is a CUDA kernel, but the device is ", device.str(),
              "; the CPU runs its own products (OpenBLAS and nnlab's small kernels): leave --gemm-impl at cublas "
              "there, and name the rung of a CUDA run variant alone (cuda:gemm=", gemm_impl_name(impl), ")");
}

}  // namespace nnlab
