#include "devices/reduce_impl.h"

#include <atomic>

#include "core/error.h"

namespace nnlab {

namespace {
std::atomic<ReduceImpl> g_reduce_impl{ReduceImpl::Auto};
}

ReduceImpl parse_reduce_impl(const std::string& text) {
  if (text == "auto" || text.empty()) return ReduceImpl::Auto;
  if (text == "uncoalesced") return ReduceImpl::Uncoalesced;
  if (text == "coalesced") return ReduceImpl::Coalesced;
  if (text == "tree") return ReduceImpl::Tree;
  if (text == "shuffle") return ReduceImpl::Shuffle;
  fail("--reduce-impl: unknown bias reduction '", text,
       "'; choose auto (the backend's own kernel), uncoalesced, coalesced, tree or shuffle (the CUDA ladder)");
}

const char* reduce_impl_name(ReduceImpl impl) {
  switch (impl) {
    case ReduceImpl::Auto: return "auto";
    case ReduceImpl::Uncoalesced: return "uncoalesced";
    case ReduceImpl::Coalesced: return "coalesced";
    case ReduceImpl::Tree: return "tree";
    case ReduceImpl::Shuffle: return "shuffle";
  }
  return "auto";
}

void set_reduce_impl(ReduceImpl impl) { g_reduce_impl.store(impl); }
ReduceImpl reduce_impl() { return g_reduce_impl.load(); }

void check_reduce_impl(ReduceImpl impl, Device device) {
  NNLAB_CHECK(impl == ReduceImpl::Auto || device.kind == DeviceKind::CUDA, "--reduce-impl ", reduce_impl_name(impl),
              " is a CUDA kernel of the reduction ladder, but the device is ", device.str(),
              "; the CPU has one bias reduction: choose auto, or run on cuda");
}

}  // namespace nnlab
