// The kernel log: which kernel or library call each dispatch actually made, with its shapes
// ("cblas_sgemm NT 64×128×3136", "cudnnConvolutionBackwardFilter algo=1"). `nnlab explain`
// switches it on around one training step and reads the calls back per autograd node.
//
// Kernels record at dispatch with one line:
//   if (kernel_log_enabled()) record_kernel("cblas_sgemm", describe(...));
// When the log is off that is a single branch on a global flag and nothing is built, so
// training pays nothing for it. The log is process-wide and guarded by a mutex: kernels are
// dispatched from the host thread of the training loop (OpenMP workers inside a kernel never
// record).
#pragma once
#include <atomic>
#include <string>
#include <vector>

namespace nnlab {

class Tensor;

struct KernelCall {
  std::string family;  // the library call or our own kernel: "cblas_sgemm", "conv2d_reference_forward"
  std::string detail;  // shapes and choices: "NT 64×128×3136", "algo=1"
};

namespace detail {
extern std::atomic<bool> g_kernel_log_on;
}

inline bool kernel_log_enabled() { return detail::g_kernel_log_on.load(std::memory_order_relaxed); }
void set_kernel_log_enabled(bool on);
void record_kernel(std::string family, std::string detail);
// Everything recorded since the last take, oldest first; the log is left empty.
std::vector<KernelCall> take_kernel_calls();

// "64×128×3136": the dimensions joined with the multiplication sign.
std::string dims_text(std::initializer_list<long long> dims);

// "64×32×28×28": a tensor's shape as the log writes it.
std::string tensor_dims(const Tensor& t);

// One line at a kernel's dispatch: records `family` with `tensor`'s shape when the log is on.
#define NNLAB_LOG_KERNEL(family, tensor)                                                    \
  do {                                                                                      \
    if (::nnlab::kernel_log_enabled()) ::nnlab::record_kernel(family, ::nnlab::tensor_dims(tensor)); \
  } while (0)

// Turns the log on for a scope (and empties it); restores the previous state after.
class KernelLogScope {
 public:
  KernelLogScope();
  ~KernelLogScope();
  KernelLogScope(const KernelLogScope&) = delete;
  KernelLogScope& operator=(const KernelLogScope&) = delete;

 private:
  bool was_on_;
};

}  // namespace nnlab
