// The device's own time (Backend::timeline, devices/backend.h) from CUDA events: each mark is
// an event recorded in the stream, stamped by the GPU when it gets there, so a timeline never
// makes the host wait until it is read.
//
// The hold is a host function queued in the stream (cudaLaunchHostFunc): the stream cannot
// run what comes after it until the function returns, and the function waits for release().
// Everything the host queues meanwhile piles up behind it; once released, the GPU runs the
// pile back to back, and the marks between give each part's device time alone. Should the
// host wait for the device while it is held (a read-back inside the step), it would wait
// forever: the function gives up after a second and says so (expired()).
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"

namespace nnlab {

namespace {

struct Gate {
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false, expired = false;
};

void CUDART_CB wait_at_gate(void* user_data) {
  auto* gate = static_cast<Gate*>(user_data);
  std::unique_lock<std::mutex> lock(gate->mutex);
  if (!gate->opened.wait_for(lock, std::chrono::seconds(1), [&] { return gate->open; })) gate->expired = true;
}

class CudaTimeline final : public DeviceTimeline {
 public:
  explicit CudaTimeline(cuda::Context& c) : c_(c) {}
  ~CudaTimeline() override {
    release();
    cudaStreamSynchronize(c_.stream);  // the gates and events are in use until the stream passes them
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  void hold() override {
    gates_.push_back(std::make_unique<Gate>());
    NNLAB_CUDA_CHECK(cudaLaunchHostFunc(c_.stream, wait_at_gate, gates_.back().get()));
  }
  void release() override {
    for (auto& gate : gates_) {
      std::lock_guard<std::mutex> lock(gate->mutex);
      gate->open = true;
      gate->opened.notify_all();
    }
  }
  void mark() override {
    if (marked_ == events_.size()) {
      cudaEvent_t e = nullptr;
      NNLAB_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    NNLAB_CUDA_CHECK(cudaEventRecord(events_[marked_++], c_.stream));
  }
  std::vector<double> read() override {
    release();
    std::vector<double> seconds;
    if (marked_ == 0) return seconds;
    NNLAB_CUDA_CHECK(cudaEventSynchronize(events_[marked_ - 1]));
    for (size_t i = 0; i < marked_; ++i) {
      float ms = 0;
      NNLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_.front(), events_[i]));
      seconds.push_back(static_cast<double>(ms) / 1e3);
    }
    return seconds;
  }
  void restart() override {
    release();
    if (!gates_.empty()) NNLAB_CUDA_CHECK(cudaStreamSynchronize(c_.stream));  // a gate is in use until passed
    gates_.clear();
    marked_ = 0;
  }
  bool expired() const override {
    for (const auto& gate : gates_) {
      std::lock_guard<std::mutex> lock(gate->mutex);
      if (gate->expired) return true;
    }
    return false;
  }

 private:
  cuda::Context& c_;
  std::vector<std::unique_ptr<Gate>> gates_;
  std::vector<cudaEvent_t> events_;  // events_[0, marked_) are the marks; the rest wait for reuse
  size_t marked_ = 0;
};

}  // namespace

std::unique_ptr<DeviceTimeline> CudaBackend::timeline() { return std::make_unique<CudaTimeline>(*ctx_); }

}  // namespace nnlab
