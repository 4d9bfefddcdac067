#include "devices/conv_impl.h"

#include <atomic>

#include "core/error.h"

namespace nnlab {

namespace {
std::atomic<ConvImpl> g_conv_impl{ConvImpl::Auto};
}

ConvImpl parse_conv_impl(const std::string& text) {
  if (text == "auto" || text.empty()) return ConvImpl::Auto;
  if (text == "reference") return ConvImpl::Reference;
  if (text == "im2col") return ConvImpl::Im2col;
  if (text == "cudnn") return ConvImpl::Cudnn;
  NNLAB_CHECK(text != "winograd" && text != "fast", "--conv-impl ", text,
              " is now called auto: the device's own choice per layer (on the CPU Winograd, direct loops or "
              "im2col, as `nnlab explain` shows; cuDNN on CUDA)");
  fail("--conv-impl: unknown convolution implementation '", text,
       "'; choose auto (the device's own choice per layer), reference (direct loops), im2col (CPU) or cudnn (CUDA)");
}

const char* conv_impl_name(ConvImpl impl) {
  switch (impl) {
    case ConvImpl::Auto: return "auto";
    case ConvImpl::Reference: return "reference";
    case ConvImpl::Im2col: return "im2col";
    case ConvImpl::Cudnn: return "cudnn";
  }
  return "auto";
}

void set_conv_impl(ConvImpl impl) { g_conv_impl.store(impl); }
ConvImpl conv_impl() { return g_conv_impl.load(); }

void check_conv_impl(ConvImpl impl, Device device) {
  const bool cuda = device.kind == DeviceKind::CUDA;
  NNLAB_CHECK(!(impl == ConvImpl::Cudnn && !cuda), "--conv-impl cudnn runs on CUDA only, but the device is ",
              device.str(), "; on the CPU choose auto, reference or im2col");
  NNLAB_CHECK(!(impl == ConvImpl::Im2col && cuda), "--conv-impl im2col is the CPU's path, but the device is ",
              device.str(), "; on CUDA choose auto, reference or cudnn");
}

}  // namespace nnlab
