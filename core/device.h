// Where a tensor lives. Device{kind, index}: the CPU is always index 0; CUDA devices are
// numbered as the CUDA runtime numbers them.
#pragma once
#include <string>

namespace nnlab {

enum class DeviceKind { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::CUDA, i}; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

// "cpu", "cuda", "cuda:1" -> Device; throws nnlab::Error on anything else.
Device parse_device(const std::string& text);

}  // namespace nnlab
