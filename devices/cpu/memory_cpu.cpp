// The CPU backend's memory methods (core's host memory), gather_rows and gather_images.
#include <cstring>

#include "core/device_memory.h"
#include "core/pixels.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/threads.h"

namespace nnlab {

CpuBackend::CpuBackend() : Backend(Device::cpu()) {
  cpu_threads();  // a program that set no thread count or denormal mode gets the defaults (threads.h)
}

// Host memory is core's (core/host_memory.cpp): a CPU tensor needs no devices code, and one
// allocator serves tensors made before and after this backend exists.
CachingAllocator& CpuBackend::allocator() { return host_memory().allocator(); }
void CpuBackend::copy_from_host(Tensor& dst, const void* src) { host_memory().copy_from_host(dst, src); }
void CpuBackend::copy_to_host(const Tensor& src, void* dst) { host_memory().copy_to_host(src, dst); }
void CpuBackend::copy(const Tensor& src, Tensor& dst) { host_memory().copy(src, dst); }
void CpuBackend::fill(Tensor& t, double value) { host_memory().fill(t, value); }
void CpuBackend::cast(const Tensor& src, Tensor& dst) { host_memory().cast(src, dst); }

// counter: int32 scalar   counter += 1
void CpuBackend::increment_counter(Tensor& counter) {
  check_device_counter("increment_counter", "counter", counter, device());
  *counter.data<int32_t>() += 1;
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

namespace {

// The twin of the CUDA kernel, element by element in the same formula (backend.h,
// core/pixels.h). index: b entries; shifts, mean_std: null where undefined.
template <typename Stored>
void gather_images_from(const Stored* src, int64_t n, const int32_t* index, const int32_t* shifts,
                        const float* mean_std, float* dst, int64_t b, int64_t c, int64_t h, int64_t w) {
  for (int64_t i = 0; i < b; ++i) {
    NNLAB_CHECK(index[i] >= 0 && index[i] < n, "gather_images: index ", index[i], " outside [0, ", n, ")");
    const int64_t dy = shifts ? shifts[3 * i] : 0, dx = shifts ? shifts[3 * i + 1] : 0;
    const bool flip = shifts && shifts[3 * i + 2] != 0;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
          const float v = sy >= 0 && sy < h && sx >= 0 && sx < w
                              ? unit_from_stored(src[((index[i] * c + ch) * h + sy) * w + sx])
                              : 0.0f;
          dst[((i * c + ch) * h + y) * w + x] = mean_std ? normalized(v, mean_std[ch], mean_std[c + ch]) : v;
        }
  }
}

}  // namespace

void CpuBackend::gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts, const Tensor& mean_std,
                               Tensor& out) {
  check_gather_images(rows, index, shifts, mean_std, out, false);
  const int64_t b = out.dim(0), c = out.dim(1), h = out.dim(2), w = out.dim(3);
  const int32_t* sh = shifts.defined() ? shifts.data<int32_t>() : nullptr;
  const float* ms = mean_std.defined() ? mean_std.data<float>() : nullptr;
  if (rows.dtype() == DType::UInt8)
    gather_images_from(rows.data<uint8_t>(), rows.dim(0), index.data<int32_t>(), sh, ms, out.data<float>(), b, c, h, w);
  else
    gather_images_from(rows.data<float>(), rows.dim(0), index.data<int32_t>(), sh, ms, out.data<float>(), b, c, h, w);
}

// The batch's place read from `position` (on the CPU, host memory like the rest): the rows
// order[position·b ...], as the CUDA kernels read them.
namespace {
int64_t gather_start(const Tensor& order, const Tensor& position, const Tensor& out) {
  const int64_t b = out.dim(0), start = static_cast<int64_t>(*position.data<int32_t>()) * b;
  NNLAB_CHECK(start >= 0 && start + b <= order.numel(), "gather_at: position ", *position.data<int32_t>(),
              " of batches of ", b, " is outside an order of ", order.numel());
  return start;
}
}  // namespace

void CpuBackend::gather_rows_at(const Tensor& rows, const Tensor& order, const Tensor& position, Tensor& out) {
  check_gather_position(order, position, out);
  const int64_t start = gather_start(order, position, out);
  gather_rows(rows, order.rows(start, start + out.dim(0)), out);
}

void CpuBackend::gather_images_at(const Tensor& rows, const Tensor& order, const Tensor& shifts,
                                  const Tensor& position, const Tensor& mean_std, Tensor& out) {
  check_gather_position(order, position, out);
  check_gather_images(rows, order, shifts, mean_std, out, true);
  const int64_t start = gather_start(order, position, out), b = out.dim(0);
  gather_images(rows, order.rows(start, start + b), shifts.defined() ? shifts.rows(start, start + b) : Tensor(),
                mean_std, out);
}

}  // namespace nnlab
