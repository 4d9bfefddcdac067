// The registry maps a Device to its Backend (the kernel table). The CPU backend always
// exists; CUDA backends exist when nnlab was built with CUDA and a device is usable.
#pragma once
#include <string>

#include "devices/backend.h"

namespace nnlab {

// Throws an Error saying why when the device cannot be used.
Backend& backend_for(Device device);

struct CudaStatus {
  bool usable = false;
  int device_count = 0;
  std::string reason;  // why not usable: built without CUDA, no driver, no GPU, ...
};
CudaStatus cuda_status();

// Resolves "cpu", "cuda", "cuda:N" or "auto". For "auto", *why says which device was
// chosen and why. An explicit CUDA device that cannot be used is an Error.
Device resolve_device(const std::string& text, std::string* why);

bool built_with_cuda();

}  // namespace nnlab
