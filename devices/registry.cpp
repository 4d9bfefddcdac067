#include "devices/registry.h"

#include <memory>
#include <mutex>
#include <vector>

#include "devices/cpu/cpu_backend.h"
#ifdef NNLAB_WITH_CUDA
#include "devices/cuda/cuda_backend.h"
#endif

namespace nnlab {

namespace {
DeviceMemory& backend_memory(Device device) { return backend_for(device); }

// Core's Tensor reaches a non-CPU device's memory through this provider (core/device_memory.h).
// It is installed while this file's statics are initialised, which happens in every program
// that links it (any program that calls backend_for, cuda_status or resolve_device), and again
// by cuda_status and resolve_device, the calls a program makes to get a CUDA device, so that
// no order of static initialisation can leave a CUDA tensor without it.
void install_memory_provider() { set_device_memory_provider(&backend_memory); }
[[maybe_unused]] const bool g_memory_provider_installed = (install_memory_provider(), true);
}  // namespace

bool built_with_cuda() {
#ifdef NNLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_simulated() {
#ifdef NNLAB_CUDA_SIMULATOR
  return true;
#else
  return false;
#endif
}

std::string device_label(Device device) {
  return device.is_cuda() && cuda_simulated() ? device.str() + kSimulatedMark : device.str();
}

CudaStatus cuda_status() {
  install_memory_provider();
#ifdef NNLAB_WITH_CUDA
  return cuda_probe();
#else
  CudaStatus s;
  s.reason = "this nnlab was built without CUDA (nvcc was not found at configure time, or NNLAB_WITH_CUDA=OFF)";
  return s;
#endif
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static CpuBackend cpu;  // never destroyed before the tensors that use it: see cpu_backend.h
    return cpu;
  }
#ifdef NNLAB_WITH_CUDA
  return cuda_backend(device.index);
#else
  fail("cannot use ", device.str(), ": ", cuda_status().reason);
#endif
}

Device resolve_device(const std::string& text, std::string* why) {
  install_memory_provider();
  if (text == "auto") {
    const CudaStatus s = cuda_status();
    if (s.usable && cuda_simulated()) {
      if (why)
        *why = "auto: chose cpu: the only CUDA device is the CUDA simulator, which runs the CUDA kernels on this "
               "CPU far slower than the CPU backend; ask for it with --device cuda";
      return Device::cpu();
    }
    if (s.usable) {
      if (why) *why = "auto: chose cuda:0 (" + std::to_string(s.device_count) + " usable CUDA device(s))";
      return Device::cuda(0);
    }
    if (why) *why = "auto: chose cpu because no CUDA device is usable: " + s.reason;
    return Device::cpu();
  }
  const Device d = parse_device(text);
  if (d.is_cuda()) {
    const CudaStatus s = cuda_status();
    NNLAB_CHECK(s.usable, "--device ", text, " cannot be used: ", s.reason, ". Use --device cpu or auto.");
    NNLAB_CHECK(d.index < s.device_count, "--device ", text, ": only ", s.device_count,
                " CUDA device(s) are present (cuda:0 .. cuda:", s.device_count - 1, ")");
  }
  if (why) *why = "device " + d.str() + " as asked";
  return d;
}

}  // namespace nnlab
