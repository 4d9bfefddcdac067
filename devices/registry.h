// The registry maps a Device to its Backend (the kernel table). The CPU backend always
// exists; CUDA backends exist when nnlab was built with CUDA and a device is usable.
#pragma once
#include <string>

#include "devices/backend.h"

namespace nnlab {

// Throws an Error saying why when the device cannot be used.
Backend& backend_for(Device device);

// The CUDA backend lives in its own library, loaded by the first of these calls that needs
// it (devices/cuda_plugin.h): a program that never asks for a CUDA device never maps the
// CUDA libraries.
CudaStatus cuda_status();  // the struct: devices/backend.h
// One paragraph per GPU (name, memory, compute capability, driver, runtime, cuBLAS and cuDNN
// versions), or why no GPU is usable; for `nnlab devices` and run records.
std::string cuda_report();
// Whether the CUDA backend has been loaded (by one of the calls above or backend_for).
bool cuda_loaded();

// Math modes of the CUDA backend, process-wide: math (backend.h's CudaMath; fp32, the default,
// is strict float32); deterministic = true allows cuDNN only deterministic algorithms
// (cuda_backend.h). Setting and reading them does not load the backend; it gets them when it
// is loaded.
struct CudaOptions {
  CudaMath math = CudaMath::Fp32;
  bool deterministic = false;
};
// "fp32" | "tf32" | "bf16"; anything else is an Error naming `option` and the choices.
CudaMath parse_cuda_math(const std::string& text, const std::string& option);
void set_cuda_options(const CudaOptions& options);
CudaOptions cuda_options();

// Resolves "cpu", "cuda", "cuda:N" or "auto". For "auto", *why says which device was
// chosen and why. An explicit CUDA device that cannot be used is an Error.
Device resolve_device(const std::string& text, std::string* why);

bool built_with_cuda();

// True on the CUDA simulator build (NNLAB_CUDA_SIMULATOR): the CUDA device runs the CUDA
// backend's kernels on this CPU, so its times are CPU times and never stand for a GPU's.
bool cuda_simulated();
// "cpu", "cuda:0", or on the simulator "cuda:0 (simulated)": the label every printed time and
// record carries, so a simulated time is never passed off as a GPU time.
std::string device_label(Device device);
// The mark device_label appends, for labels that are not a Device (a run variant's text).
inline constexpr const char* kSimulatedMark = " (simulated)";

}  // namespace nnlab
