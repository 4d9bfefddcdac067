#include "devices/conv_impl.h"

#include <atomic>

#include "core/error.h"

namespace nnlab {

namespace {
std::atomic<ConvImpl> g_conv_impl{ConvImpl::Fast};
}

ConvImpl parse_conv_impl(const std::string& text) {
  if (text == "reference") return ConvImpl::Reference;
  if (text == "im2col") return ConvImpl::Im2col;
  if (text == "winograd") return ConvImpl::Winograd;
  if (text == "cudnn") return ConvImpl::Cudnn;
  if (text == "fast" || text.empty()) return ConvImpl::Fast;
  fail("--conv-impl: unknown convolution implementation '", text,
       "'; choose reference (direct loops), im2col or winograd (CPU), cudnn (CUDA) or fast");
}

const char* conv_impl_name(ConvImpl impl) {
  switch (impl) {
    case ConvImpl::Reference: return "reference";
    case ConvImpl::Im2col: return "im2col";
    case ConvImpl::Winograd: return "winograd";
    case ConvImpl::Cudnn: return "cudnn";
    default: return "fast";
  }
}

void set_conv_impl(ConvImpl impl) { g_conv_impl.store(impl); }
ConvImpl conv_impl() { return g_conv_impl.load(); }

void check_conv_impl(ConvImpl impl, Device device) {
  const bool cuda = device.kind == DeviceKind::CUDA;
  NNLAB_CHECK(!(impl == ConvImpl::Cudnn && !cuda), "--conv-impl cudnn runs on CUDA only, but the device is ",
              device.str(), "; on the CPU choose reference, im2col or winograd");
  NNLAB_CHECK(!((impl == ConvImpl::Im2col || impl == ConvImpl::Winograd) && cuda), "--conv-impl ",
              conv_impl_name(impl), " is a CPU path, but the device is ", device.str(),
              "; on CUDA choose reference or cudnn");
}

ConvImpl resolved_conv_impl(ConvImpl impl, Device device) {
  if (impl != ConvImpl::Fast) return impl;
  return device.kind == DeviceKind::CUDA ? ConvImpl::Cudnn : ConvImpl::Winograd;
}

}  // namespace nnlab
