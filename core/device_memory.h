// The memory half of a device: what core's Tensor needs to allocate, free, copy, fill and
// cast. It lives in core, below the kernel tables, so that core never reaches up into
// devices (issue 24; ggml splits its buffer interface from its compute one for the same
// reason). Host memory is core's own (host_memory.cpp): plain memory needs no device code,
// so a CPU tensor works in any program, before or without the devices library.
//
// Other devices come from the devices library, which installs one provider for them all:
// devices/registry.cpp does so in its static initialisation (any program that calls a kernel
// links that file) and again in cuda_status and resolve_device, the calls that hand a program
// a CUDA device. A program without the devices library gets an Error naming it. Each Backend
// is itself the DeviceMemory of its device (devices/backend.h).
#pragma once
#include <cstddef>

#include "core/allocator.h"
#include "core/device.h"

namespace nnlab {

class Tensor;

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Blocks for Storage; the allocator also reports current and peak bytes.
  virtual CachingAllocator& allocator() = 0;
  // dst's nbytes() from/to host memory; both tensors contiguous, same dtype and shape.
  virtual void copy_from_host(Tensor& dst, const void* src) = 0;
  virtual void copy_to_host(const Tensor& src, void* dst) = 0;
  // Within this device.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, double value) = 0;
  virtual void cast(const Tensor& src, Tensor& dst) = 0;  // same shape, other dtype
};

// The host's memory: 64-byte aligned blocks from the "cpu" caching allocator.
DeviceMemory& host_memory();

// Throws an Error saying why when the device's memory cannot be had (no provider installed,
// or the provider's own reason: built without CUDA, no GPU, ...).
DeviceMemory& device_memory(Device device);

// Serves every non-CPU device. Installing it again replaces it.
using DeviceMemoryProvider = DeviceMemory& (*)(Device device);
void set_device_memory_provider(DeviceMemoryProvider provider);

}  // namespace nnlab
