// The simulator's devices: how many there are (NNLAB_SIM_DEVICES), which one each host thread
// has selected (cudaSetDevice), what each reports, and which may use another's memory
// (peer access) and copy to it.
//
// Like the GPUs of one machine, every device has its own memory (sim_runtime.cpp tags each
// allocation with the device that was current), its own streams (sim_streams.cpp), and work on
// one device may touch another's memory only after cudaDeviceEnablePeerAccess; a pointer used
// on the wrong device is refused with a message naming both. All devices share the CPU: their
// streams take turns at the simulator's block threads.
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_runtime_state.h"

namespace nnlab::sim {

namespace {

thread_local int t_device = 0;
std::mutex g_peer_mutex;
bool g_peer_enabled[kMaxDevices][kMaxDevices] = {};  // [device][peer]: work on device may use peer's memory

bool valid_device(int device) { return device >= 0 && device < device_count(); }

// "cudaSetDevice: device 2 does not exist (the simulator has 2 devices; NNLAB_SIM_DEVICES sets how many)"
std::string no_such_device(const char* call, int device) {
  return std::string(call) + ": device " + std::to_string(device) + " does not exist (the simulator has " +
         std::to_string(device_count()) + (device_count() == 1 ? " device" : " devices") +
         "; NNLAB_SIM_DEVICES sets how many)";
}

// Whether [p, p + bytes) lies in device memory of `device`; otherwise the diagnostic.
std::string not_on_device(const char* call, const char* what, const void* p, size_t bytes, int device) {
  Region r;
  if (find_region(p, &r) && r.kind == MemoryKind::Device && r.device == device &&
      static_cast<size_t>(static_cast<const char*>(p) - r.base) + bytes <= r.bytes)
    return "";
  char where[32];
  std::snprintf(where, sizeof where, "%p", p);
  std::string is = "not device memory";
  if (find_region(p, &r) && r.kind == MemoryKind::Device)
    is = r.device == device ? "past the end of its allocation" : "device memory of cuda:" + std::to_string(r.device);
  return std::string(call) + ": " + what + " (" + where + ", " + std::to_string(bytes) + " bytes) should be on cuda:" +
         std::to_string(device) + " but is " + is;
}

}  // namespace

int device_count() {
  static const int count = [] {
    const long long n = env_count("NNLAB_SIM_DEVICES");
    NNLAB_CHECK(n <= kMaxDevices, "NNLAB_SIM_DEVICES must be at most ", kMaxDevices, ", got ", n);
    return n > 0 ? static_cast<int>(n) : 1;
  }();
  return count;
}

int current_device() { return t_device; }
void set_current_device(int device) { t_device = device; }

bool device_can_use(int device, int owner) {
  if (device == owner) return true;
  std::lock_guard<std::mutex> lock(g_peer_mutex);
  return g_peer_enabled[device][owner];
}

}  // namespace nnlab::sim

using nnlab::sim::fail_call;
using nnlab::sim::sticky_or;

cudaError_t cudaSetDevice(int device) {
  if (!nnlab::sim::valid_device(device))
    return fail_call(cudaErrorInvalidDevice, nnlab::sim::no_such_device("cudaSetDevice", device));
  nnlab::sim::set_current_device(device);
  return sticky_or(cudaSuccess);
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail_call(cudaErrorInvalidValue, "cudaGetDevice: null argument");
  *device = nnlab::sim::current_device();
  return sticky_or(cudaSuccess);
}

namespace {

// The compute capability every simulated device reports: 9.0 (Hopper, the architecture CI
// builds for), or NNLAB_SIM_COMPUTE_CAPABILITY, e.g. "7.0" for a GPU without bf16 tensor cores,
// so what nnlab refuses on one can be tested.
std::pair<int, int> compute_capability() {
  static const std::pair<int, int> cc = [] {
    const char* text = std::getenv("NNLAB_SIM_COMPUTE_CAPABILITY");
    if (!text) return std::make_pair(9, 0);
    int major = 0, minor = 0;
    char tail = 0;
    NNLAB_CHECK(std::sscanf(text, "%d.%d%c", &major, &minor, &tail) == 2 && major >= 3 && major <= 20 &&
                    minor >= 0 && minor <= 9,
                "NNLAB_SIM_COMPUTE_CAPABILITY must be MAJOR.MINOR, e.g. 8.0, got '", text,
                "'; unset it for the default");
    return std::make_pair(major, minor);
  }();
  return cc;
}

}  // namespace

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return fail_call(cudaErrorInvalidValue, "cudaGetDeviceProperties: null argument");
  if (!nnlab::sim::valid_device(device))
    return fail_call(cudaErrorInvalidDevice, nnlab::sim::no_such_device("cudaGetDeviceProperties", device));
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CUDA simulator (CPU)");
  // The same UUID for device d in every process on this machine, as a GPU's is: NCCL (and the
  // simulator's NCCL) tell two ranks on one GPU apart by it.
  std::snprintf(prop->uuid.bytes, sizeof prop->uuid.bytes, "nnlab-sim-gpu%02d", device);
  prop->pciBusID = device;
  prop->totalGlobalMem = nnlab::sim::device_memory_bytes();
  prop->sharedMemPerBlock = 48 << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = nnlab::sim::block_threads();
  prop->maxThreadsPerMultiProcessor = 2048;  // as on sm_80 and sm_90
  std::tie(prop->major, prop->minor) = compute_capability();
  prop->canMapHostMemory = 1;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

// Every pair of simulated devices can reach each other, as GPUs on one NVLink or PCIe switch.
cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  if (!can_access) return fail_call(cudaErrorInvalidValue, "cudaDeviceCanAccessPeer: null argument");
  if (!nnlab::sim::valid_device(device) || !nnlab::sim::valid_device(peer))
    return fail_call(cudaErrorInvalidDevice,
                     nnlab::sim::no_such_device("cudaDeviceCanAccessPeer", nnlab::sim::valid_device(device) ? peer : device));
  *can_access = device != peer;
  return sticky_or(cudaSuccess);
}

// From now on work on the current device may use `peer`'s memory (one direction only).
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  const int device = nnlab::sim::current_device();
  if (!nnlab::sim::valid_device(peer))
    return fail_call(cudaErrorInvalidDevice, nnlab::sim::no_such_device("cudaDeviceEnablePeerAccess", peer));
  if (peer == device || flags != 0)
    return fail_call(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess(" + std::to_string(peer) + ", " +
                                                std::to_string(flags) + ") on cuda:" + std::to_string(device) +
                                                ": the peer must be another device and the flags 0");
  std::lock_guard<std::mutex> lock(nnlab::sim::g_peer_mutex);
  if (nnlab::sim::g_peer_enabled[device][peer])
    return fail_call(cudaErrorPeerAccessAlreadyEnabled, "cudaDeviceEnablePeerAccess: cuda:" + std::to_string(device) +
                                                            " already has access to cuda:" + std::to_string(peer));
  nnlab::sim::g_peer_enabled[device][peer] = true;
  return sticky_or(cudaSuccess);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  const int device = nnlab::sim::current_device();
  if (!nnlab::sim::valid_device(peer))
    return fail_call(cudaErrorInvalidDevice, nnlab::sim::no_such_device("cudaDeviceDisablePeerAccess", peer));
  std::lock_guard<std::mutex> lock(nnlab::sim::g_peer_mutex);
  if (!nnlab::sim::g_peer_enabled[device][peer])
    return fail_call(cudaErrorPeerAccessNotEnabled, "cudaDeviceDisablePeerAccess: cuda:" + std::to_string(device) +
                                                        " has no access to cuda:" + std::to_string(peer) + " to disable");
  nnlab::sim::g_peer_enabled[device][peer] = false;
  return sticky_or(cudaSuccess);
}

// A copy between two devices' memory, in `stream`'s order; it needs no peer access (the
// driver stages it when the devices cannot reach each other).
cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  if (const cudaError_t sticky = sticky_or(cudaSuccess); sticky != cudaSuccess) return sticky;
  if (!nnlab::sim::is_stream(stream))
    return fail_call(cudaErrorInvalidResourceHandle, "cudaMemcpyPeerAsync: not a stream");
  if (!nnlab::sim::valid_device(dst_device) || !nnlab::sim::valid_device(src_device))
    return fail_call(cudaErrorInvalidDevice, nnlab::sim::no_such_device(
                                                 "cudaMemcpyPeerAsync",
                                                 nnlab::sim::valid_device(dst_device) ? src_device : dst_device));
  if (bytes == 0) return sticky_or(cudaSuccess);
  std::string wrong = nnlab::sim::not_on_device("cudaMemcpyPeerAsync", "the destination", dst, bytes, dst_device);
  if (wrong.empty()) wrong = nnlab::sim::not_on_device("cudaMemcpyPeerAsync", "the source", src, bytes, src_device);
  if (!wrong.empty()) return fail_call(cudaErrorInvalidValue, wrong);
  nnlab::sim::enqueue(stream, "copy", "cudaMemcpyPeerAsync", [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  return sticky_or(cudaSuccess);
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaMemcpyPeer", nullptr, true)) return e;
  nnlab::sim::drain_all();
  const cudaError_t e = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, nullptr);
  nnlab::sim::drain(nullptr);
  return e;
}
