// Host memory (core/device_memory.h): 64-byte aligned blocks (one cache line, the widest
// SIMD load) from the caching allocator; copies, fills and dtype casts. The CPU backend's
// memory methods are these (devices/cpu/memory_cpu.cpp).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/device_memory.h"
#include "core/error.h"
#include "core/huge_pages.h"
#include "core/tensor.h"

namespace nnlab {

namespace {

// Fills shorter than this stay on one thread: the fork costs more than the stores
// (4 × the CPU kernels' grain, devices/cpu/dispatch.h, as before the fill moved here).
constexpr long kParallelFill = 4 * 16384;

template <typename T>
void fill_typed(const Tensor& t, double value) {
  T* p = static_cast<T*>(t.raw_data());
  const T v = static_cast<T>(value);
  const long n = static_cast<long>(t.numel());
#pragma omp parallel for schedule(static) if (n > kParallelFill)
  for (long i = 0; i < n; ++i) p[i] = v;
}

template <typename From, typename To>
void cast_typed(const Tensor& src, const Tensor& dst) {
  const From* s = static_cast<const From*>(src.raw_data());
  To* d = static_cast<To*>(dst.raw_data());
  const long n = static_cast<long>(src.numel());
  for (long i = 0; i < n; ++i) d[i] = static_cast<To>(s[i]);
}

template <typename From>
void cast_from(const Tensor& src, const Tensor& dst) {
  switch (dst.dtype()) {
    case DType::Float32: cast_typed<From, float>(src, dst); return;
    case DType::Float64: cast_typed<From, double>(src, dst); return;
    case DType::Int32: cast_typed<From, int32_t>(src, dst); return;
    case DType::UInt8: cast_typed<From, uint8_t>(src, dst); return;
    case DType::BFloat16: cast_typed<From, BFloat16>(src, dst); return;
  }
}

// 64-byte aligned; large blocks 2 MiB-aligned on huge pages (core/huge_pages.h).
void* allocate_host(size_t bytes) {
  if (!wants_huge_pages(bytes)) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) advise_huge_pages(p, rounded);
  return p;
}

class HostMemory final : public DeviceMemory {
 public:
  HostMemory()
      : allocator_(
            "cpu", [](size_t bytes) { return allocate_host(bytes); },
            [](void* p) { std::free(p); }) {}

  CachingAllocator& allocator() override { return allocator_; }

  void copy_from_host(Tensor& dst, const void* src) override {
    if (dst.nbytes()) std::memcpy(dst.raw_data(), src, dst.nbytes());
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    if (src.nbytes()) std::memcpy(dst, src.raw_data(), src.nbytes());
  }
  void copy(const Tensor& src, Tensor& dst) override {
    if (src.nbytes()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
  }

  void fill(Tensor& t, double value) override {
    switch (t.dtype()) {
      case DType::Float32: fill_typed<float>(t, value); return;
      case DType::Float64: fill_typed<double>(t, value); return;
      case DType::Int32: fill_typed<int32_t>(t, value); return;
      case DType::UInt8: fill_typed<uint8_t>(t, value); return;
      case DType::BFloat16: fill_typed<BFloat16>(t, value); return;
    }
  }

  void cast(const Tensor& src, Tensor& dst) override {
    NNLAB_CHECK(src.numel() == dst.numel(), "cast: ", src.describe(), " to ", dst.describe());
    switch (src.dtype()) {
      case DType::Float32: cast_from<float>(src, dst); return;
      case DType::Float64: cast_from<double>(src, dst); return;
      case DType::Int32: cast_from<int32_t>(src, dst); return;
      case DType::UInt8: cast_from<uint8_t>(src, dst); return;
      case DType::BFloat16: cast_from<BFloat16>(src, dst); return;
    }
  }

 private:
  CachingAllocator allocator_;
};

std::atomic<DeviceMemoryProvider> g_provider{nullptr};

}  // namespace

DeviceMemory& host_memory() {
  // Constructed by the first CPU tensor, so destroyed after every static that holds one.
  static HostMemory host;
  return host;
}

DeviceMemory& device_memory(Device device) {
  if (device.is_cpu()) return host_memory();
  const DeviceMemoryProvider provider = g_provider.load(std::memory_order_acquire);
  NNLAB_CHECK(provider, "cannot use ", device.str(),
              ": no device library has registered its memory; link nnlab_devices (nnlab::nnlab links it)");
  return provider(device);
}

void set_device_memory_provider(DeviceMemoryProvider provider) {
  g_provider.store(provider, std::memory_order_release);
}

}  // namespace nnlab
