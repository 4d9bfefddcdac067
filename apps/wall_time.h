// Seconds of wall time since a steady-clock reading: how the trainer and the gradient reducer
// time their phases on the host.
#pragma once
#include <chrono>

namespace nnlab {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nnlab
