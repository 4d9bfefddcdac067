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
//
// Each record also carries the time spent in the call, from the record to the end of the
// dispatching function (KernelTiming). A CPU kernel has finished when its function returns,
// so `nnlab explain` can add these up and say how much of a step is spent outside the
// kernels: graph building, allocation, dispatch. A CUDA call returns once queued, so its time
// is the launch's only. A call made inside another timed one (a GEMM inside a convolution)
// keeps -1, so nothing is counted twice.
//
// Each of nnlab's own CUDA kernels also records its launch, grid × block, into the call that
// was open when it launched (devices/cuda/launch.h calls record_launch), so `nnlab explain
// --launches` can show what a call handed the GPU. A library call (cuBLAS, cuDNN) launches its
// kernels out of sight and records none.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace nnlab {

class Tensor;

// One kernel launch: the kernel's name and its configuration, as written in
// kernel<<<grid, block>>>. Plain integers, so this header needs no CUDA header.
struct LaunchDims {
  unsigned x = 1, y = 1, z = 1;
};
struct KernelLaunch {
  std::string kernel;
  LaunchDims grid, block;
};

struct KernelCall {
  std::string family;  // the library call or our own kernel: "cblas_sgemm", "conv2d_reference_forward"
  std::string detail;  // shapes and choices: "NT 64×128×3136", "algo=1"
  double seconds = -1;  // time in the call (see above); -1: not timed, or inside another timed call
  // With a mark hook (explain on CUDA): the number of the device-timeline mark queued at the
  // call's end, and the device's time from the mark before it to this one (explain fills it in).
  int mark = -1;
  double device_seconds = -1;
  // explain on CUDA: how long the device sat idle before this call's work, in a step queued as
  // training queues it (launch by launch); -1: not measured.
  double launch_wait_seconds = -1;
  // The kernels this call launched, in order (nnlab's own kernels only; see above).
  std::vector<KernelLaunch> launches;
};

namespace detail {
extern std::atomic<bool> g_kernel_log_on;
}

inline bool kernel_log_enabled() { return detail::g_kernel_log_on.load(std::memory_order_relaxed); }
void set_kernel_log_enabled(bool on);
// Appends a call; returns its place in the log, for KernelTiming.
size_t record_kernel(std::string family, std::string detail);
inline constexpr size_t kNotRecorded = static_cast<size_t>(-1);
// `nnlab explain` on CUDA: a function called at the end of every recorded call (a
// KernelTiming's end), which queues a mark on the device's timeline and returns its number
// (KernelCall::mark); the device's time between marks is then each call's. nullptr: none.
void set_kernel_mark_hook(std::function<int()> hook);

// A kernel launch, given to the call whose KernelTiming is open on this thread (the innermost).
// A launch outside every recorded call becomes a call of its own, family the kernel's name and
// detail "(launched outside any recorded call)", so no launch of a logged step goes unlisted.
void record_launch(const char* kernel, LaunchDims grid, LaunchDims block);

// Everything recorded since the last take, oldest first; the log is left empty.
std::vector<KernelCall> take_kernel_calls();

// "64×128×3136": the dimensions joined with the multiplication sign.
std::string dims_text(std::initializer_list<long long> dims);

// "64×32×28×28": a tensor's shape as the log writes it ("64×32×28×28 bf16" for bf16 data).
std::string tensor_dims(const Tensor& t);

// Times a kernel call while the log is on: the clock starts at construction and stops when
// the object goes out of scope, at the end of the dispatching function; the time is given to
// the record attached (at once, or later where the call is only known after it ran). Only the
// outermost timing of nested calls counts. With the log off it is one branch.
class KernelTiming {
 public:
  KernelTiming();
  explicit KernelTiming(size_t record) : KernelTiming() { attach(record); }
  ~KernelTiming();
  KernelTiming(const KernelTiming&) = delete;
  KernelTiming& operator=(const KernelTiming&) = delete;
  // Also makes `record` the call that launches on this thread belong to, until this timing ends.
  void attach(size_t record);

 private:
  bool on_ = false, outermost_ = false;
  size_t record_ = kNotRecorded;
  size_t enclosing_ = kNotRecorded;  // the call open before this one, open again after it
  std::chrono::steady_clock::time_point start_;
};

// One line at the top of a kernel's dispatch: records `family` with `tensor`'s shape when the
// log is on, and times the rest of the function.
#define NNLAB_LOG_KERNEL(family, tensor)                                                              \
  ::nnlab::KernelTiming nnlab_kernel_timing_(::nnlab::kernel_log_enabled()                            \
                                                 ? ::nnlab::record_kernel(family, ::nnlab::tensor_dims(tensor)) \
                                                 : ::nnlab::kNotRecorded)

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
