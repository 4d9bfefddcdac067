// Device memory: copies between host and device, fills, dtype casts, row gathers, and the
// loader's batches gathered from a data set held on the device (gather_images).
// Host → device copies go through pinned staging buffers: the caller's memory is copied into
// one at once, so it may be freed as soon as the call returns (the CUDA documentation does not
// promise that an asynchronous copy from pageable memory has read it by then), and the DMA
// from the pinned buffer is queued on the stream without stalling it. Device → host copies go
// through a pinned staging buffer and synchronise: the host needs the values.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/pixels.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// ---- kernels ----------------------------------------------------------------------------

// p: (n)   p[i] = v
template <typename T>
__global__ void fill_kernel(T* p, T v, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) p[i] = v;
}

// counter: int32 scalar; one thread: counter += 1
__global__ void increment_counter_kernel(int32_t* counter) { *counter += 1; }

// src, dst: (n)   dst[i] = (To) src[i]
template <typename From, typename To>
__global__ void cast_kernel(const From* src, To* dst, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) dst[i] = static_cast<To>(src[i]);
}

// Up to 32 tensors and their copies in another dtype (float32 weights and their bf16 copies,
// or bf16 gradients and their float32 widenings), passed by value (about 800 bytes of kernel
// parameters), as the optimizer's lists are (optim_cuda.cu).
template <typename From, typename To>
struct CastList {
  static constexpr int kMax = 32;
  const From* src[kMax];
  To* dst[kMax];
  int64_t n[kMax];
};

// grid: (blocks, count), blockIdx.y picks the tensor   dst_t[i] = To(src_t[i]): float32 → bf16
// rounds to nearest even (a forward's weight copies), bf16 → float32 is exact (their gradients)
template <typename From, typename To>
__global__ void cast_list_kernel(CastList<From, To> list) {
  const int t = static_cast<int>(blockIdx.y);
  const From* src = list.src[t];
  To* dst = list.dst[t];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < list.n[t];
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = To(src[i]);
}

// position (may be null): the batch's index (and shifts) start at entry position·b, read on
// the device; a batch past the order's end (n_index entries) gathers nothing and records the
// fault for the host.
__device__ bool batch_outside_order(const int32_t* position, int64_t b, int64_t n_index, int32_t* fault) {
  if (!position || (*position >= 0 && (*position + 1) * b <= n_index)) return false;
  if (threadIdx.x == 0 && blockIdx.x == 0 &&
      atomicCAS(&fault[0], 0, static_cast<int32_t>(cuda::DeviceFault::GatherIndexOutOfRange)) == 0) {
    fault[1] = *position;
    fault[2] = 0;
    fault[3] = static_cast<int32_t>(n_index / b);
  }
  return true;
}

// An index outside [0, n_rows) leaves its output untouched and records a fault for the host
// (the thread of the row's first element reports it).
__device__ bool index_outside_rows(int32_t src, int64_t i, int64_t n_rows, bool first_of_row, int32_t* fault) {
  if (src >= 0 && src < n_rows) return false;
  if (first_of_row && atomicCAS(&fault[0], 0, static_cast<int32_t>(cuda::DeviceFault::GatherIndexOutOfRange)) == 0) {
    fault[1] = src;
    fault[2] = static_cast<int32_t>(i);
    fault[3] = static_cast<int32_t>(n_rows);
  }
  return true;
}

// rows: (n_rows, c, h, w) of Stored (uint8 for p / 255, or float32)  index: (b)
// shifts: (b, 3) {dy, dx, flip} or null   mean_std: (2, c) {mean; std} or null
// out: float32 (b, c, h, w)
// One thread per output element, the host loader's arithmetic (core/pixels.h):
//   out[i, ch, y, x] = (v − mean[ch]) / std[ch],  v = unit(rows[index[i], ch, y + dy, x' + dx]),
//   x' = flip ? w − 1 − x : x, and v = 0 outside the image (zero padding, then normalised)
// The data set stays on the device as stored (bytes: a quarter of float32's memory) and each
// batch is converted as it is gathered, in the pass that copies it anyway.
template <typename Stored>
__global__ void gather_images_kernel(const Stored* rows, const int32_t* index, const int32_t* shifts,
                                     const float* mean_std, float* out, int64_t b, int64_t c, int64_t h, int64_t w,
                                     int64_t n_rows, int32_t* fault, const int32_t* position, int64_t n_index) {
  if (batch_outside_order(position, b, n_index, fault)) return;
  if (position) {
    index += *position * b;
    if (shifts) shifts += 3 * *position * b;
  }
  NNLAB_GRID_STRIDE(e, b * c * h * w) {
    const int64_t x = e % w, y = (e / w) % h, ch = (e / (w * h)) % c, i = e / (w * h * c);
    const int32_t src = index[i];
    if (index_outside_rows(src, i, n_rows, e % (c * h * w) == 0, fault)) continue;
    const bool flip = shifts && shifts[3 * i + 2];
    const int64_t sy = y + (shifts ? shifts[3 * i] : 0), sx = (flip ? w - 1 - x : x) + (shifts ? shifts[3 * i + 1] : 0);
    const float v = sy >= 0 && sy < h && sx >= 0 && sx < w ? unit_from_stored(rows[((src * c + ch) * h + sy) * w + sx])
                                                           : 0.0f;
    out[e] = mean_std ? normalized(v, mean_std[ch], mean_std[c + ch]) : v;
  }
}

// rows: (n_rows, row)  index: (b)  out: (b, row), in words of type W.   out[i] = rows[index[i]]
// position (may be null): index starts at entry position·b, read on the device (a CUDA graph's
// replay gathers the batch of its own step).
template <typename W>
__global__ void gather_rows_kernel(const W* rows, const int32_t* index, W* out, int64_t b, int64_t row,
                                   int64_t n_rows, int32_t* fault, const int32_t* position, int64_t n_index) {
  if (batch_outside_order(position, b, n_index, fault)) return;
  if (position) index += *position * b;
  NNLAB_GRID_STRIDE(e, b * row) {
    const int64_t i = e / row, j = e % row;
    const int32_t src = index[i];
    if (index_outside_rows(src, i, n_rows, j == 0, fault)) continue;
    out[e] = rows[src * row + j];
  }
}

// ---- launchers --------------------------------------------------------------------------

template <typename T>
void launch_fill(const cuda::Context& c, const Tensor& t, double value) {
  cuda::launch("fill_kernel", fill_kernel<T>, cuda::grid_for(c, t.numel()), cuda::kThreads, c.stream, cuda::ptr<T>(t),
               static_cast<T>(value), t.numel());
}

template <typename From, typename To>
void launch_cast(const cuda::Context& c, const Tensor& src, const Tensor& dst) {
  cuda::launch("cast_kernel", cast_kernel<From, To>, cuda::grid_for(c, src.numel()), cuda::kThreads, c.stream,
               cuda::ptr<From>(src), cuda::ptr<To>(dst), src.numel());
}

template <typename From>
void launch_cast_from(const cuda::Context& c, const Tensor& src, const Tensor& dst) {
  switch (dst.dtype()) {
    case DType::Float32: launch_cast<From, float>(c, src, dst); return;
    case DType::Float64: launch_cast<From, double>(c, src, dst); return;
    case DType::Int32: launch_cast<From, int32_t>(c, src, dst); return;
    case DType::UInt8: launch_cast<From, uint8_t>(c, src, dst); return;
    case DType::BFloat16: launch_cast<From, BFloat16>(c, src, dst); return;
  }
}

}  // namespace

namespace cuda {

constexpr size_t kMaxUploadBuffers = 4;
constexpr size_t kMaxUploadChunk = size_t(64) << 20;

Context::Staging& Context::upload_buffer(size_t bytes) {
  Staging* reuse = nullptr;
  for (Staging& s : upload_staging)  // a big enough buffer whose copy has run
    if (s.bytes >= bytes && cudaEventQuery(s.copied) == cudaSuccess && (!reuse || s.last_use < reuse->last_use))
      reuse = &s;
  if (!reuse && upload_staging.size() < kMaxUploadBuffers) {
    upload_staging.emplace_back();
    reuse = &upload_staging.back();
    NNLAB_CUDA_CHECK(cudaEventCreateWithFlags(&reuse->copied, cudaEventDisableTiming));
  }
  if (!reuse) {  // all in flight: wait for the oldest
    reuse = &upload_staging.front();
    for (Staging& s : upload_staging)
      if (s.last_use < reuse->last_use) reuse = &s;
    NNLAB_CUDA_CHECK(cudaEventSynchronize(reuse->copied));
  }
  if (reuse->bytes < bytes) {
    if (reuse->host) NNLAB_CUDA_CHECK(cudaFreeHost(reuse->host));
    reuse->host = nullptr;
    reuse->bytes = 0;
    const size_t want = std::max(bytes, size_t(1) << 20);
    NNLAB_CUDA_CHECK(cudaMallocHost(&reuse->host, want));
    reuse->bytes = want;
  }
  reuse->last_use = ++uploads;
  return *reuse;
}

char* Context::small_upload_slot(cudaEvent_t& record) {
  if (!small_uploads)
    NNLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&small_uploads), kSmallUploadBytes * kSmallUploadSlots));
  const size_t slot = next_small_upload;
  next_small_upload = (slot + 1) % kSmallUploadSlots;
  cudaEvent_t& event = small_group_copied[slot / kSmallUploadGroup];
  if (slot % kSmallUploadGroup == 0 && event && cudaEventQuery(event) != cudaSuccess)
    NNLAB_CUDA_CHECK(cudaEventSynchronize(event));  // the group's last round is still being copied
  if (!event) NNLAB_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  record = slot % kSmallUploadGroup == kSmallUploadGroup - 1 ? event : nullptr;
  return small_uploads + slot * kSmallUploadBytes;
}

}  // namespace cuda

void CudaBackend::copy_from_host(Tensor& dst, const void* src) {
  cuda::Context& c = *ctx_;
  // A graph would replay the copy from the staging buffer, whose bytes belong to a later
  // upload by then: the step's inputs must be on the device before the capture.
  NNLAB_CHECK(!c.capturing, "copy_from_host(", dst.describe(), ") inside a captured CUDA graph step: host data ",
              "cannot enter a graph (upload it before the step; a replay would read stale bytes)");
  const size_t total = dst.nbytes();
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst.raw_data());
  if (total <= cuda::Context::kSmallUploadBytes) {
    cudaEvent_t record = nullptr;
    char* slot = c.small_upload_slot(record);
    std::memcpy(slot, from, total);
    NNLAB_CUDA_CHECK(cudaMemcpyAsync(to, slot, total, cudaMemcpyHostToDevice, c.stream));
    if (record) NNLAB_CUDA_CHECK(cudaEventRecord(record, c.stream));
    return;
  }
  for (size_t done = 0; done < total; done += cuda::kMaxUploadChunk) {
    const size_t chunk = std::min(total - done, cuda::kMaxUploadChunk);
    cuda::Context::Staging& s = c.upload_buffer(chunk);
    std::memcpy(s.host, from + done, chunk);
    NNLAB_CUDA_CHECK(cudaMemcpyAsync(to + done, s.host, chunk, cudaMemcpyHostToDevice, c.stream));
    NNLAB_CUDA_CHECK(cudaEventRecord(s.copied, c.stream));
  }
}

// Device → pinned staging (fast DMA) → caller's memory, in chunks of at most 64 MiB so a
// large read-back does not pin a buffer of its size.
void CudaBackend::copy_to_host(const Tensor& src, void* dst) {
  cuda::Context& c = *ctx_;
  NNLAB_CHECK(!c.capturing, "copy_to_host(", src.describe(), ") inside a captured CUDA graph step: a read-back ",
              "waits for the device, and a graph's step must not (read results after the replay)");
  const size_t total = src.nbytes();
  constexpr size_t kMaxStaging = size_t(64) << 20;
  const size_t want = total < kMaxStaging ? total : kMaxStaging;
  if (want > c.pinned_bytes) {
    if (c.pinned) NNLAB_CUDA_CHECK(cudaFreeHost(c.pinned));
    c.pinned = nullptr;
    c.pinned_bytes = 0;
    NNLAB_CUDA_CHECK(cudaMallocHost(&c.pinned, want));
    c.pinned_bytes = want;
  }
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(dst);
  for (size_t done = 0; done < total; done += want) {
    const size_t chunk = total - done < want ? total - done : want;
    NNLAB_CUDA_CHECK(cudaMemcpyAsync(c.pinned, from + done, chunk, cudaMemcpyDeviceToHost, c.stream));
    NNLAB_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    std::memcpy(to + done, c.pinned, chunk);
  }
  if (total == 0) NNLAB_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  c.raise_device_fault();
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  NNLAB_CHECK(src.nbytes() == dst.nbytes(), "copy: ", src.describe(), " to ", dst.describe());
  if (!src.nbytes()) return;
  NNLAB_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice, ctx_->stream));
}

void CudaBackend::fill(Tensor& t, double value) {
  if (!t.numel()) return;
  switch (t.dtype()) {
    case DType::Float32: launch_fill<float>(*ctx_, t, value); return;
    case DType::Float64: launch_fill<double>(*ctx_, t, value); return;
    case DType::Int32: launch_fill<int32_t>(*ctx_, t, value); return;
    case DType::UInt8: launch_fill<uint8_t>(*ctx_, t, value); return;
    case DType::BFloat16: launch_fill<BFloat16>(*ctx_, t, value); return;
  }
}

void CudaBackend::cast(const Tensor& src, Tensor& dst) {
  NNLAB_CHECK(src.numel() == dst.numel(), "cast: ", src.describe(), " to ", dst.describe());
  if (!src.numel()) return;
  switch (src.dtype()) {
    case DType::Float32: launch_cast_from<float>(*ctx_, src, dst); return;
    case DType::Float64: launch_cast_from<double>(*ctx_, src, dst); return;
    case DType::Int32: launch_cast_from<int32_t>(*ctx_, src, dst); return;
    case DType::UInt8: launch_cast_from<uint8_t>(*ctx_, src, dst); return;
    case DType::BFloat16: launch_cast_from<BFloat16>(*ctx_, src, dst); return;
  }
}

namespace {

// Up to 32 tensors a launch, the grid sized for the largest.
template <typename From, typename To>
void launch_cast_lists(cuda::Context& c, const std::vector<Tensor>& src, std::vector<Tensor>& dst) {
  using List = CastList<From, To>;
  for (size_t first = 0; first < src.size(); first += List::kMax) {
    List list{};
    const int count = static_cast<int>(std::min<size_t>(List::kMax, src.size() - first));
    int64_t largest = 1;
    for (int t = 0; t < count; ++t) {
      const Tensor &a = src[first + t], &b = dst[first + t];
      NNLAB_CHECK(a.numel() == b.numel(), "cast_all: ", a.describe(), " to ", b.describe());
      list.src[t] = cuda::ptr<From>(a);
      list.dst[t] = cuda::ptr<To>(b);
      list.n[t] = a.numel();
      largest = std::max(largest, a.numel());
    }
    cuda::launch("cast_list_kernel", cast_list_kernel<From, To>,
                 dim3(static_cast<unsigned>(cuda::grid_for(c, largest)), static_cast<unsigned>(count)), cuda::kThreads,
                 c.stream, list);
  }
}

}  // namespace

// float32 → bf16 (a forward's weight copies) or bf16 → float32 (their gradients, backward),
// every tensor the same way: one launch per 32 tensors. Any other mix, one cast at a time.
void CudaBackend::cast_all(const std::vector<Tensor>& src, std::vector<Tensor>& dst) {
  NNLAB_CHECK(src.size() == dst.size(), "cast_all: ", src.size(), " sources for ", dst.size(), " outputs");
  if (src.empty()) return;
  const DType from = src[0].dtype(), to = dst[0].dtype();
  const bool narrowing = from == DType::Float32 && to == DType::BFloat16;
  const bool widening = from == DType::BFloat16 && to == DType::Float32;
  bool alike = narrowing || widening;
  for (size_t i = 0; i < src.size(); ++i) alike = alike && src[i].dtype() == from && dst[i].dtype() == to;
  if (!alike) return Backend::cast_all(src, dst);
  KernelTiming timing(kernel_log_enabled()  // nnlab explain: "cast_all 8 tensors to bf16"
                          ? record_kernel("cast_all", std::to_string(src.size()) + " tensors to " +
                                                          (narrowing ? "bf16" : "float32"))
                          : kNotRecorded);
  if (narrowing) launch_cast_lists<float, BFloat16>(*ctx_, src, dst);
  else launch_cast_lists<BFloat16, float>(*ctx_, src, dst);
}

void CudaBackend::increment_counter(Tensor& counter) {
  check_device_counter("increment_counter", "counter", counter, device());
  cuda::launch("increment_counter_kernel", increment_counter_kernel, 1, 1, ctx_->stream, cuda::ptr<int32_t>(counter));
}

namespace {

// rows: (n, d...)  index: int32 (b)  out: (b, d...)   Rows are moved as 4-byte words when
// their size allows (float32, int32, uint8 rows of a multiple of 4), else byte by byte.
// position (may be null): the rows of index[position·b ...], position read on the device.
void gather_rows_launch(cuda::Context& c, const Tensor& rows, const Tensor& index, const Tensor* position, Tensor& out) {
  check_dtype("gather_rows", index, DType::Int32);
  const int64_t n = rows.dim(0), b = out.dim(0);
  const size_t row_bytes = n ? rows.nbytes() / static_cast<size_t>(n) : 0;
  if (b == 0 || row_bytes == 0) return;
  const int32_t* at = position ? cuda::ptr<int32_t>(*position) : nullptr;
  if (row_bytes % 4 == 0) {
    const int64_t row = static_cast<int64_t>(row_bytes / 4);
    cuda::launch("gather_rows_kernel", gather_rows_kernel<uint32_t>, cuda::grid_for(c, b * row), cuda::kThreads,
                 c.stream, cuda::ptr<uint32_t>(rows), cuda::ptr<int32_t>(index), cuda::ptr<uint32_t>(out), b, row, n,
                 c.fault_device, at, index.numel());
  } else {
    const int64_t row = static_cast<int64_t>(row_bytes);
    cuda::launch("gather_rows_kernel", gather_rows_kernel<uint8_t>, cuda::grid_for(c, b * row), cuda::kThreads,
                 c.stream, cuda::ptr<uint8_t>(rows), cuda::ptr<int32_t>(index), cuda::ptr<uint8_t>(out), b, row, n,
                 c.fault_device, at, index.numel());
  }
}

template <typename Stored>
void gather_images_as(cuda::Context& ctx, const Tensor& rows, const Tensor& index, const Tensor& shifts,
                      const Tensor* position, const Tensor& mean_std, Tensor& out) {
  const int64_t b = out.dim(0), c = out.dim(1), h = out.dim(2), w = out.dim(3);
  if (b == 0 || c * h * w == 0) return;
  cuda::launch("gather_images_kernel", gather_images_kernel<Stored>, cuda::grid_for(ctx, b * c * h * w),
               cuda::kThreads, ctx.stream, cuda::ptr<Stored>(rows), cuda::ptr<int32_t>(index),
               shifts.defined() ? cuda::ptr<int32_t>(shifts) : nullptr,
               mean_std.defined() ? cuda::ptr<float>(mean_std) : nullptr, cuda::ptr<float>(out), b, c, h, w,
               rows.dim(0), ctx.fault_device, position ? cuda::ptr<int32_t>(*position) : nullptr, index.numel());
}

void gather_images_launch(cuda::Context& ctx, const Tensor& rows, const Tensor& index, const Tensor& shifts,
                          const Tensor* position, const Tensor& mean_std, Tensor& out) {
  if (rows.dtype() == DType::UInt8) gather_images_as<uint8_t>(ctx, rows, index, shifts, position, mean_std, out);
  else gather_images_as<float>(ctx, rows, index, shifts, position, mean_std, out);
}

}  // namespace

void CudaBackend::gather_rows(const Tensor& rows, const Tensor& index, Tensor& out) {
  NNLAB_CHECK(index.numel() == out.dim(0), "gather_rows: ", index.numel(), " indices for ", out.describe());
  gather_rows_launch(*ctx_, rows, index, nullptr, out);
}

void CudaBackend::gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts, const Tensor& mean_std,
                                Tensor& out) {
  check_gather_images(rows, index, shifts, mean_std, out, false);
  gather_images_launch(*ctx_, rows, index, shifts, nullptr, mean_std, out);
}

void CudaBackend::gather_rows_at(const Tensor& rows, const Tensor& order, const Tensor& position, Tensor& out) {
  check_gather_position(order, position, out);
  gather_rows_launch(*ctx_, rows, order, &position, out);
}

void CudaBackend::gather_images_at(const Tensor& rows, const Tensor& order, const Tensor& shifts,
                                   const Tensor& position, const Tensor& mean_std, Tensor& out) {
  check_gather_position(order, position, out);
  check_gather_images(rows, order, shifts, mean_std, out, true);
  gather_images_launch(*ctx_, rows, order, shifts, &position, mean_std, out);
}

}  // namespace nnlab
