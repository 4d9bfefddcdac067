#include "devices/kernel_log.h"

#include <mutex>

#include "core/tensor.h"

namespace nnlab {

namespace detail {
std::atomic<bool> g_kernel_log_on{false};
}

namespace {
std::mutex g_mutex;
std::vector<KernelCall> g_calls;
std::function<int()> g_mark_hook;  // set and called on the dispatching thread only
}  // namespace

void set_kernel_mark_hook(std::function<int()> hook) { g_mark_hook = std::move(hook); }

void set_kernel_log_enabled(bool on) { detail::g_kernel_log_on.store(on, std::memory_order_relaxed); }

size_t record_kernel(std::string family, std::string detail) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_calls.emplace_back();
  g_calls.back().family = std::move(family);
  g_calls.back().detail = std::move(detail);
  return g_calls.size() - 1;
}

namespace {
thread_local int t_timing_depth = 0;              // KernelTimings alive on this thread
thread_local size_t t_open_record = kNotRecorded;  // the call a launch on this thread belongs to
}  // namespace

void record_launch(const char* kernel, LaunchDims grid, LaunchDims block) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (t_open_record < g_calls.size()) {
    g_calls[t_open_record].launches.push_back({kernel, grid, block});
    return;
  }
  g_calls.emplace_back();
  g_calls.back().family = kernel;
  g_calls.back().detail = "(launched outside any recorded call)";
  g_calls.back().launches.push_back({kernel, grid, block});
}

KernelTiming::KernelTiming() : on_(kernel_log_enabled()) {
  if (!on_) return;
  outermost_ = t_timing_depth++ == 0;
  enclosing_ = t_open_record;
  start_ = std::chrono::steady_clock::now();
}

void KernelTiming::attach(size_t record) {
  record_ = record;
  if (on_ && record != kNotRecorded) t_open_record = record;
}

KernelTiming::~KernelTiming() {
  if (!on_) return;
  --t_timing_depth;
  t_open_record = enclosing_;
  if (record_ == kNotRecorded) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int mark = g_mark_hook ? g_mark_hook() : -1;  // every call's, nested ones too: each its own kernels
  std::lock_guard<std::mutex> lock(g_mutex);
  if (record_ >= g_calls.size()) return;  // the log was taken meanwhile
  if (outermost_) g_calls[record_].seconds = seconds;
  g_calls[record_].mark = mark;
}

std::vector<KernelCall> take_kernel_calls() {
  std::lock_guard<std::mutex> lock(g_mutex);
  t_open_record = kNotRecorded;  // its index would name a call of the next take
  std::vector<KernelCall> out;
  out.swap(g_calls);
  return out;
}

std::string dims_text(std::initializer_list<long long> dims) {
  std::string out;
  for (long long d : dims) out += (out.empty() ? "" : "×") + std::to_string(d);
  return out;
}

std::string tensor_dims(const Tensor& t) {
  std::string out;
  for (int64_t d : t.shape()) out += (out.empty() ? "" : "×") + std::to_string(d);
  return (out.empty() ? "scalar" : out) + (t.dtype() == DType::BFloat16 ? " bf16" : "");
}

KernelLogScope::KernelLogScope() : was_on_(kernel_log_enabled()) {
  take_kernel_calls();
  set_kernel_log_enabled(true);
}

KernelLogScope::~KernelLogScope() { set_kernel_log_enabled(was_on_); }

}  // namespace nnlab
