// Host memory: 64-byte aligned blocks (one cache line, the widest SIMD load) from the
// caching allocator; copies, fills and dtype casts.
#include <cstdlib>
#include <cstring>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/threads.h"

namespace nnlab {

CpuBackend::CpuBackend()
    : Backend(Device::cpu()),
      allocator_(
          "cpu", [](size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); },
          [](void* p) { std::free(p); }) {
  cpu_threads();  // a program that set no thread count or denormal mode gets the defaults (threads.h)
}

void CpuBackend::copy_from_host(Tensor& dst, const void* src) {
  if (dst.nbytes()) std::memcpy(dst.raw_data(), src, dst.nbytes());
}

void CpuBackend::copy_to_host(const Tensor& src, void* dst) {
  if (src.nbytes()) std::memcpy(dst, src.raw_data(), src.nbytes());
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.nbytes()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
}

namespace {
template <typename T>
void fill_typed(const Tensor& t, double value) {
  T* p = static_cast<T*>(t.raw_data());
  const T v = static_cast<T>(value);
  const long n = static_cast<long>(t.numel());
#pragma omp parallel for schedule(static) if (n > 4 * cpu::kParallelGrain)
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
  }
}
}  // namespace

void CpuBackend::fill(Tensor& t, double value) {
  switch (t.dtype()) {
    case DType::Float32: fill_typed<float>(t, value); return;
    case DType::Float64: fill_typed<double>(t, value); return;
    case DType::Int32: fill_typed<int32_t>(t, value); return;
    case DType::UInt8: fill_typed<uint8_t>(t, value); return;
  }
}

void CpuBackend::cast(const Tensor& src, Tensor& dst) {
  NNLAB_CHECK(src.numel() == dst.numel(), "cast: ", src.describe(), " to ", dst.describe());
  switch (src.dtype()) {
    case DType::Float32: cast_from<float>(src, dst); return;
    case DType::Float64: cast_from<double>(src, dst); return;
    case DType::Int32: cast_from<int32_t>(src, dst); return;
    case DType::UInt8: cast_from<uint8_t>(src, dst); return;
  }
}

// rows: (n, d...)  index: int32 (b)  out: (b, d...)
void CpuBackend::gather_rows(const Tensor& rows, const Tensor& index, Tensor& out) {
  const int64_t n = rows.dim(0), b = index.numel();
  const size_t row_bytes = n ? rows.nbytes() / static_cast<size_t>(n) : 0;
  const int32_t* idx = index.data<int32_t>();
  const char* src = static_cast<const char*>(rows.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < b; ++i) {
    NNLAB_CHECK(idx[i] >= 0 && idx[i] < n, "gather_rows: index ", idx[i], " outside [0, ", n, ")");
    std::memcpy(dst + i * row_bytes, src + idx[i] * row_bytes, row_bytes);
  }
}

}  // namespace nnlab
