// The CUDA runtime on the simulator: one or more devices (NNLAB_SIM_DEVICES), each one's
// memory kept apart from host memory and from the other devices', copies checked against
// where each pointer lives, and CUDA's error model (a last error that cudaGetLastError clears,
// a sticky error after a fault that every later call returns).
//
// Device memory is ordinary heap memory, but every allocation is registered in a map, and
// nothing may use it as host memory through the runtime (a cudaMemcpy whose kind says
// otherwise is refused with a message naming the call, the pointer and what it is), nor may a
// kernel, cuBLAS or cuDNN be handed host memory. Fresh device memory is filled with 0xFF
// bytes (a NaN in every float) so a read of memory never written shows up in the results.
// Each allocation belongs to the device that was current when it was made; work on another
// device may use it only after cudaDeviceEnablePeerAccess, as on GPUs of one machine.
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/huge_pages.h"
#include "devices/cpu/threads.h"
#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_runtime_state.h"

namespace nnlab::sim {

namespace {

std::mutex g_memory_mutex;
std::map<const char*, Region>& regions() {
  static auto* map = new std::map<const char*, Region>();  // never destroyed: used at exit
  return *map;
}
size_t g_device_bytes_in_use[kMaxDevices] = {};

std::mutex g_error_mutex;
cudaError_t g_sticky = cudaSuccess;
std::string g_sticky_detail;
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_diagnostic;

}  // namespace

long long env_count(const char* name) {
  const char* text = std::getenv(name);
  if (!text) return 0;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  NNLAB_CHECK(end != text && *end == '\0' && errno == 0 && v > 0, name, " must be a positive whole number, got '", text,
              "'; unset it for the default");
  return v;
}

// Each simulated device's memory: half the machine's shared among the devices, or
// NNLAB_SIM_MEMORY_MB each.
size_t device_memory_bytes() {
  static const size_t bytes = [] {
    if (const long long mb = env_count("NNLAB_SIM_MEMORY_MB")) return static_cast<size_t>(mb) << 20;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t half = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 2
                                              : size_t(4) << 30;
    return half / static_cast<size_t>(device_count());
  }();
  return bytes;
}

namespace {

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// "device memory", "mapped host memory", ... or "ordinary host memory" for p.
std::string where(const void* p) {
  Region r;
  return find_region(p, &r) ? memory_kind_name(r.kind) : "ordinary host memory";
}

bool is_device(const void* p, size_t bytes) {
  Region r;
  return find_region(p, &r) && r.kind == MemoryKind::Device &&
         static_cast<size_t>(static_cast<const char*>(p) - r.base) + bytes <= r.bytes;
}

void register_region(void* p, size_t bytes, MemoryKind kind, int device = -1) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  regions()[static_cast<const char*>(p)] = Region{static_cast<const char*>(p), bytes, kind, device};
}

const char* kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an unknown cudaMemcpyKind";
}

// Whether a copy of `bytes` from src to dst agrees with `kind`; otherwise the diagnostic.
std::string copy_mismatch(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const bool dst_device = is_device(dst, bytes), src_device = is_device(src, bytes);
  bool want_dst = false, want_src = false;
  switch (kind) {
    case cudaMemcpyHostToHost: break;
    case cudaMemcpyHostToDevice: want_dst = true; break;
    case cudaMemcpyDeviceToHost: want_src = true; break;
    case cudaMemcpyDeviceToDevice: want_dst = want_src = true; break;
    case cudaMemcpyDefault: return "";
    default: return std::string(call) + ": " + kind_name(kind);
  }
  if (dst_device == want_dst && src_device == want_src) return "";
  return std::string(call) + "(" + kind_name(kind) + ", " + std::to_string(bytes) + " bytes): the destination " +
         hex(dst) + " is " + where(dst) + " and the source " + hex(src) + " is " + where(src) +
         (want_dst || want_src ? " (device memory must hold the whole range)" : "");
}

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Device: return "device memory";
    case MemoryKind::MappedHost: return "mapped host memory";
    case MemoryKind::PinnedHost: return "pinned host memory";
  }
  return "memory";
}

bool find_region(const void* p, Region* region) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = regions().upper_bound(c);
  if (it == regions().begin()) return false;
  --it;
  if (c >= it->second.base + std::max<size_t>(it->second.bytes, 1)) return false;
  *region = it->second;
  return true;
}

bool check_device_access(const char* call, const char* what, const void* p, size_t bytes) {
  if (!p && bytes == 0) return true;
  Region r;
  const bool found = find_region(p, &r);
  const bool inside = found && static_cast<size_t>(static_cast<const char*>(p) - r.base) + bytes <= r.bytes;
  const bool reachable = !found || r.kind != MemoryKind::Device || device_can_use(current_device(), r.device);
  if (found && r.kind != MemoryKind::PinnedHost && inside && reachable) return true;
  std::string text = std::string(call) + ": " + what + " (" + hex(p) + ", " + std::to_string(bytes) + " bytes) ";
  if (found && inside && !reachable)
    text += "is device memory of cuda:" + std::to_string(r.device) + ", but the work runs on cuda:" +
            std::to_string(current_device()) + ", which has no peer access to it (cudaDeviceEnablePeerAccess(" +
            std::to_string(r.device) + ") on cuda:" + std::to_string(current_device()) + ", or copy it over)";
  else if (!found || r.kind == MemoryKind::PinnedHost)
    text += "is " + where(p) + ", which the device cannot use; allocate it with cudaMalloc";
  else
    text += "runs past the end of its " + std::string(memory_kind_name(r.kind)) + " allocation of " +
            std::to_string(r.bytes) + " bytes at " + hex(r.base);
  set_diagnostic(text);
  return false;
}

const std::string& last_diagnostic() { return t_diagnostic; }
void set_diagnostic(std::string text) { t_diagnostic = std::move(text); }
void set_launch_error(cudaError_t error) { t_last_error = error; }

void raise_sticky_error(cudaError_t error, std::string detail) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  if (g_sticky != cudaSuccess) return;
  g_sticky = error;
  g_sticky_detail = std::move(detail);
}

void clear_sticky_error_for_tests() {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  g_sticky = cudaSuccess;
  g_sticky_detail.clear();
}

cudaError_t sticky_or(cudaError_t error) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  if (g_sticky == cudaSuccess) return error;
  t_diagnostic = g_sticky_detail;
  return g_sticky;
}

cudaError_t fail_call(cudaError_t error, std::string detail) {
  t_diagnostic = std::move(detail);
  t_last_error = error;
  return sticky_or(error);
}

int block_threads() {
  static const int from_env = static_cast<int>(std::min<long long>(env_count("NNLAB_SIM_THREADS"), 1024));
  return from_env > 0 ? from_env : std::max(1, cpu_threads());
}

int worker_threads() {
#if defined(__SANITIZE_THREAD__)
  return 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return 1;
#endif
#endif
  return std::max(1, cpu_threads());
}

void keep_denormals_on_this_thread() {
  _mm_setcsr(_mm_getcsr() & ~(0x8000u | 0x0040u));  // clear FTZ (bit 15) and DAZ (bit 6)
}

}  // namespace nnlab::sim

using nnlab::sim::fail_call;
using nnlab::sim::sticky_or;

// ---- errors and the device --------------------------------------------------------------

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorPeerAccessAlreadyEnabled: return "cudaErrorPeerAccessAlreadyEnabled";
    case cudaErrorPeerAccessNotEnabled: return "cudaErrorPeerAccessNotEnabled";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = sticky_or(nnlab::sim::t_last_error);
  nnlab::sim::t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return sticky_or(nnlab::sim::t_last_error); }

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return fail_call(cudaErrorInvalidValue, "cudaDriverGetVersion: null argument");
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) { return cudaDriverGetVersion(version); }

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail_call(cudaErrorInvalidValue, "cudaGetDeviceCount: null argument");
  // The first call of every run (nnlab's probe), on the caller's thread: a bad
  // NNLAB_SIM_MEMORY_MB or NNLAB_SIM_THREADS is reported here, not later on a stream's thread.
  *count = nnlab::sim::device_count();
  nnlab::sim::device_memory_bytes();
  nnlab::sim::block_threads();
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return fail_call(cudaErrorInvalidValue, "cudaMemGetInfo: null argument");
  std::lock_guard<std::mutex> lock(nnlab::sim::g_memory_mutex);
  *total_bytes = nnlab::sim::device_memory_bytes();
  *free_bytes =
      *total_bytes - std::min(*total_bytes, nnlab::sim::g_device_bytes_in_use[nnlab::sim::current_device()]);
  return sticky_or(cudaSuccess);
}

// ---- memory -----------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!ptr) return fail_call(cudaErrorInvalidValue, "cudaMalloc: null argument");
  *ptr = nullptr;
  if (const cudaError_t sticky = sticky_or(cudaSuccess); sticky != cudaSuccess) return sticky;
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaMalloc", nullptr, true)) return e;
  const int device = nnlab::sim::current_device();
  {
    std::lock_guard<std::mutex> lock(nnlab::sim::g_memory_mutex);
    size_t& in_use = nnlab::sim::g_device_bytes_in_use[device];
    if (bytes > nnlab::sim::device_memory_bytes() - std::min(nnlab::sim::device_memory_bytes(), in_use))
      return fail_call(cudaErrorMemoryAllocation, "cudaMalloc(" + std::to_string(bytes) +
                                                      " bytes): more than the simulated device's free memory");
    in_use += bytes;
  }
  void* p = nullptr;
  // The exact size, so AddressSanitizer's red zone starts right after the last byte. A large
  // block (a data set on the device) on huge pages, as the host's (core/huge_pages.h): the fill
  // below then faults once per 2 MiB, not once per 4 KiB.
  const bool huge = nnlab::wants_huge_pages(bytes);
  if (posix_memalign(&p, huge ? nnlab::kHugePage : 256, std::max<size_t>(bytes, 1)) != 0) {
    std::lock_guard<std::mutex> lock(nnlab::sim::g_memory_mutex);
    nnlab::sim::g_device_bytes_in_use[device] -= bytes;
    return fail_call(cudaErrorMemoryAllocation, "cudaMalloc: the host could not provide the memory");
  }
  if (huge) nnlab::advise_huge_pages(p, bytes);
  std::memset(p, 0xFF, bytes);
  nnlab::sim::register_region(p, bytes, nnlab::sim::MemoryKind::Device, device);
  *ptr = p;
  return cudaSuccess;
}

// Frees memory the simulator registered as `kind`; cudaFree waits for the device, as on a GPU.
static cudaError_t free_region(const char* call, void* ptr, bool device) {
  if (!ptr) return sticky_or(cudaSuccess);
  if (const cudaError_t e = nnlab::sim::refuse_during_capture(call, nullptr, false)) return e;
  nnlab::sim::drain_all();
  {
    std::lock_guard<std::mutex> lock(nnlab::sim::g_memory_mutex);
    auto it = nnlab::sim::regions().find(static_cast<const char*>(ptr));
    if (it == nnlab::sim::regions().end() || (it->second.kind == nnlab::sim::MemoryKind::Device) != device)
      return fail_call(cudaErrorInvalidValue, std::string(call) + "(" + nnlab::sim::hex(ptr) +
                                                  "): not the start of an allocation of " +
                                                  (device ? "cudaMalloc" : "cudaMallocHost/cudaHostAlloc"));
    if (device) nnlab::sim::g_device_bytes_in_use[it->second.device] -= it->second.bytes;
    nnlab::sim::regions().erase(it);
  }
  std::free(ptr);
  return sticky_or(cudaSuccess);
}

cudaError_t cudaFree(void* ptr) { return free_region("cudaFree", ptr, true); }
cudaError_t cudaFreeHost(void* ptr) { return free_region("cudaFreeHost", ptr, false); }

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if (!ptr) return fail_call(cudaErrorInvalidValue, "cudaHostAlloc: null argument");
  void* p = nullptr;
  if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0)
    return fail_call(cudaErrorMemoryAllocation, "cudaHostAlloc: out of host memory");
  nnlab::sim::register_region(
      p, bytes, flags & cudaHostAllocMapped ? nnlab::sim::MemoryKind::MappedHost : nnlab::sim::MemoryKind::PinnedHost);
  *ptr = p;
  return sticky_or(cudaSuccess);
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }

// With unified addressing the device sees mapped host memory at its host address.
cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned) {
  nnlab::sim::Region r;
  if (!device_ptr || !nnlab::sim::find_region(host_ptr, &r) || r.kind != nnlab::sim::MemoryKind::MappedHost)
    return fail_call(cudaErrorInvalidValue, "cudaHostGetDevicePointer: " + nnlab::sim::hex(host_ptr) +
                                                " is not host memory allocated with cudaHostAllocMapped");
  *device_ptr = host_ptr;
  return sticky_or(cudaSuccess);
}

// ---- copies and memset ------------------------------------------------------------------

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t sticky = sticky_or(cudaSuccess); sticky != cudaSuccess) return sticky;
  if (!nnlab::sim::is_stream(stream))
    return fail_call(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync: not a stream");
  if (bytes == 0) return cudaSuccess;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return fail_call(cudaErrorInvalidMemcpyDirection, "cudaMemcpyAsync: " + std::to_string(int(kind)) +
                                                          " is not a cudaMemcpyKind");
  const std::string mismatch = nnlab::sim::copy_mismatch("cudaMemcpyAsync", dst, src, bytes, kind);
  if (!mismatch.empty()) return fail_call(cudaErrorInvalidValue, mismatch);
  // Copies run in stream order, reading the source when the stream gets to them: a host
  // buffer must stay alive until then (the strict reading of the CUDA documentation).
  nnlab::sim::enqueue(stream, "copy", "cudaMemcpyAsync", [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  // To ordinary (pageable) host memory the call returns only once the copy is done.
  nnlab::sim::Region r;
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && !nnlab::sim::find_region(dst, &r)) {
    if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaMemcpyAsync to pageable host memory", stream, false))
      return e;
    nnlab::sim::drain(stream);
  }
  return sticky_or(cudaSuccess);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaMemcpy", nullptr, true)) return e;
  nnlab::sim::drain_all();
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  nnlab::sim::drain(nullptr);
  return e;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t sticky = sticky_or(cudaSuccess); sticky != cudaSuccess) return sticky;
  if (!nnlab::sim::check_device_access("cudaMemsetAsync", "the destination", ptr, bytes))
    return fail_call(cudaErrorInvalidValue, nnlab::sim::last_diagnostic());
  nnlab::sim::enqueue(stream, "copy", "cudaMemsetAsync", [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return sticky_or(cudaSuccess);
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaMemset", nullptr, true)) return e;
  const cudaError_t e = cudaMemsetAsync(ptr, value, bytes, nullptr);
  nnlab::sim::drain(nullptr);
  return e;
}
