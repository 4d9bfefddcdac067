// How the CUDA simulator runs a grid: blocks spread over a few CPU threads, and inside a
// block each CUDA thread on a fiber, so __syncthreads() means what it means on a GPU.
//
// One block at a time runs on each CPU thread. Its scheduler (the CPU thread's own stack)
// starts a fiber for thread 0, which runs until it ends or reaches a barrier. A fiber whose
// thread ended takes the next thread that has not started, so a kernel without barriers runs
// all its threads on one fiber, one after another, at the cost of a function call each. At a
// barrier the thread's fiber is suspended and the scheduler starts the next thread on a fresh
// fiber. When every thread has started and each has either ended or reached the barrier, the
// barrier opens: the waiting threads resume in thread order, each up to its next barrier.
// A barrier reached by some threads of a block while others have exited is reported as the
// launch's error (on a GPU it hangs or corrupts the block: CUDA requires every thread of the
// block to reach each __syncthreads()).
//
// Warps: the threads of a block form warps of 32 in linear thread order, as on a GPU, and a
// warp call (__shfl_*_sync, __syncwarp) suspends a lane the same way until the lanes its mask
// names have arrived; those lanes then resume before any other thread runs
// (devices/cuda/sim/sim_warps.cpp). A lane stuck at a warp call when nothing else can run is
// reported as the barrier's divergence is.
//
// Under ThreadSanitizer each CUDA thread runs on a fiber of its own, and the only order
// between two threads of a block is the one their barriers (and atomics) give, so a missing
// __syncthreads() is reported as a data race on the shared memory it should have protected.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_block.h"
#include "devices/cuda/sim/sim_runtime_state.h"
#include "devices/cuda/sim/sim_launch.h"

namespace nnlab::sim {

thread_local std::atomic<ThreadCoordinates*> current_thread{nullptr};

namespace {

#if defined(NNLAB_SIM_TSAN) || defined(__SANITIZE_ADDRESS__)
constexpr size_t kFiberStack = size_t(512) << 10;  // sanitizers make frames larger
#else
constexpr size_t kFiberStack = size_t(128) << 10;
#endif
#ifdef NNLAB_SIM_TSAN
constexpr bool kFiberPerThread = true;
#else
constexpr bool kFiberPerThread = false;
#endif

dim3 unflatten(long long i, dim3 extent) {
  return dim3(static_cast<unsigned>(i % extent.x), static_cast<unsigned>(i / extent.x % extent.y),
              static_cast<unsigned>(i / (static_cast<long long>(extent.x) * extent.y)));
}

}  // namespace

BlockScheduler::Worker& BlockScheduler::idle_worker() {
  if (idle_.empty()) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->fiber = std::make_unique<Fiber>(kFiberStack);
    workers_.back()->owner = this;
    idle_.push_back(workers_.back().get());
  }
  Worker* w = idle_.back();
  idle_.pop_back();
  return *w;
}

void BlockScheduler::resume(Worker& w) {
  running_.store(&w, std::memory_order_relaxed);
  current_thread.store(&w.coords, std::memory_order_relaxed);
  w.fiber->switch_from(Fiber::thread_fiber());
  running_.store(nullptr, std::memory_order_relaxed);
  // Under ThreadSanitizer a fiber is not reused within its block: a reused one would carry
  // its last thread's history into the next and hide their races.
  if (w.ended.load(std::memory_order_relaxed)) (kFiberPerThread ? ended_ : idle_).push_back(&w);
}

void BlockScheduler::worker_main(void* raw) {
  Worker& w = *static_cast<Worker*>(raw);
  BlockScheduler& s = *w.owner;
  const Grid& g = *s.grid_;
  for (;;) {
    const int t = s.next_unstarted_.fetch_add(1, std::memory_order_relaxed);
    if (t >= s.threads_) break;
    w.coords = ThreadCoordinates{unflatten(t, g.block), s.block_idx_, g.block, g.grid};
    current_thread.store(&w.coords, std::memory_order_relaxed);
    g.body();
    s.lane_exited(t);
#ifdef NNLAB_SIM_TSAN
    __tsan_release(&s.done_token_);
#endif
    s.exited_.fetch_add(1, std::memory_order_relaxed);
    if (kFiberPerThread) break;
  }
  w.ended.store(true, std::memory_order_relaxed);
}

int BlockScheduler::thread_index(const Worker& w) const {
  const dim3 t = w.coords.thread_idx, b = grid_->block;
  return static_cast<int>(t.x + static_cast<long long>(b.x) * (t.y + static_cast<long long>(b.y) * t.z));
}

// A fiber may report (a misused warp call): the message is handed over through an atomic
// pointer, the only order it makes between a CUDA thread and the scheduler, once the launch
// has failed anyway.
void BlockScheduler::report(std::string error) {
  auto text = std::make_unique<std::string>(std::string(grid_->kernel) + ", block (" + std::to_string(block_idx_.x) +
                                            ", " + std::to_string(block_idx_.y) + ", " +
                                            std::to_string(block_idx_.z) + "): " + error);
  std::string* none = nullptr;
  if (error_.compare_exchange_strong(none, text.get(), std::memory_order_acq_rel)) text.release();
}

void BlockScheduler::arrive_at_barrier() {
  Worker& w = *running_.load(std::memory_order_relaxed);
  at_barrier_[thread_index(w)].store(&w, std::memory_order_relaxed);
  waiting_.fetch_add(1, std::memory_order_relaxed);
#ifdef NNLAB_SIM_TSAN
  __tsan_release(&barrier_token_);
  __tsan_release(&abandon_token_);
#endif
  Fiber::thread_fiber().switch_from(*w.fiber);
#ifdef NNLAB_SIM_TSAN
  __tsan_acquire(&barrier_token_);
#endif
  current_thread.store(&w.coords, std::memory_order_relaxed);
}

// Lanes whose warp call is complete run first (in lane order, up to their next wait), then
// threads not yet started; when neither is left, the barrier opens, or the block is stuck.
std::string BlockScheduler::run(const Grid& g, long long linear_block) {
  grid_ = &g;
  block_idx_ = unflatten(linear_block, g.grid);
  threads_ = static_cast<int>(g.block.x * g.block.y * g.block.z);
  next_unstarted_ = 0;
  exited_ = 0;
  waiting_ = 0;
  if (at_barrier_.size() < static_cast<size_t>(threads_)) at_barrier_ = std::vector<std::atomic<Worker*>>(threads_);
  for (int i = 0; i < threads_; ++i) at_barrier_[i].store(nullptr, std::memory_order_relaxed);
  reset_warps();
  for (;;) {
    if (const std::vector<Worker*> lanes = take_ready_lanes(); !lanes.empty()) {
      for (Worker* w : lanes) resume(*w);
      continue;
    }
    if (next_unstarted_.load(std::memory_order_relaxed) < threads_) {
      Worker& w = idle_worker();
      w.ended = false;
      w.fiber->start(&BlockScheduler::worker_main, &w);
      resume(w);
      continue;
    }
    const int waiting = waiting_.load(std::memory_order_relaxed);
    if (at_warp_calls_.load(std::memory_order_relaxed) > 0) {
      report(describe_stuck_warp_call());
    } else if (waiting == 0) {
      break;
    } else if (exited_.load(std::memory_order_relaxed) > 0) {
      report("__syncthreads() was reached by " + std::to_string(waiting) + " of " + std::to_string(threads_) +
             " threads while " + std::to_string(exited_.load()) + " had already exited (a barrier in divergent code)");
    }
    if (error_.load(std::memory_order_acquire)) {
      // The waiting fibers are abandoned where they stand; their stacks are reused afresh.
#ifdef NNLAB_SIM_TSAN
      __tsan_acquire(&abandon_token_);
#endif
      for (int i = 0; i < threads_; ++i)
        if (Worker* w = at_barrier_[i].exchange(nullptr, std::memory_order_relaxed)) idle_.push_back(w);
      abandon_warp_calls();
      break;
    }
    // The barrier opens: resume the waiting threads in thread order.
    std::vector<Worker*> resumed;
    for (int i = 0; i < threads_; ++i)
      if (Worker* w = at_barrier_[i].exchange(nullptr, std::memory_order_relaxed)) resumed.push_back(w);
    waiting_ = 0;
    for (Worker* w : resumed) resume(*w);
  }
#ifdef NNLAB_SIM_TSAN
  __tsan_acquire(&done_token_);
#endif
  idle_.insert(idle_.end(), ended_.begin(), ended_.end());
  ended_.clear();
  current_thread.store(nullptr, std::memory_order_relaxed);
  const std::unique_ptr<std::string> error(error_.exchange(nullptr, std::memory_order_acquire));
  return error ? *error : std::string();
}

namespace {

// The CPU threads that run blocks: the stream's own thread and block_threads() − 1 helpers,
// which wake for a grid and take blocks from a shared counter.
class BlockPool {
 public:
  static BlockPool& instance() {
    static BlockPool* pool = new BlockPool();  // never destroyed: grids may run at exit
    return *pool;
  }
  std::string run(const Grid& g);

 private:
  void helper_loop();
  void take_blocks();

  std::mutex run_mutex_;  // one grid at a time (streams run their grids one after another)
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const Grid* grid_ = nullptr;
  long long blocks_ = 0;
  std::atomic<long long> next_block_{0};
  int busy_helpers_ = 0;
  unsigned generation_ = 0;
  std::string error_;
  std::vector<std::thread> helpers_;
};

void BlockPool::take_blocks() {
  for (;;) {
    const long long b = next_block_.fetch_add(1);
    if (b >= blocks_) return;
    std::string e = BlockScheduler::of_this_thread().run(*grid_, b);
    if (!e.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error_.empty()) error_ = std::move(e);
    }
  }
}

void BlockPool::helper_loop() {
  unsigned seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
    }
    take_blocks();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--busy_helpers_ == 0) done_.notify_all();
  }
}

std::string BlockPool::run(const Grid& g) {
  std::lock_guard<std::mutex> one_grid(run_mutex_);
  const long long blocks = static_cast<long long>(g.grid.x) * g.grid.y * g.grid.z;
  const int want = std::max(1, std::min<int>(block_threads(), static_cast<int>(std::min<long long>(blocks, 64))));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (static_cast<int>(helpers_.size()) < want - 1) helpers_.emplace_back([this] { helper_loop(); });
    grid_ = &g;
    blocks_ = blocks;
    next_block_ = 0;
    error_.clear();
    if (want > 1) {
      busy_helpers_ = static_cast<int>(helpers_.size());
      ++generation_;
      wake_.notify_all();
    }
  }
  take_blocks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_helpers_ == 0; });
  return error_;
}

}  // namespace

void syncthreads() { BlockScheduler::of_this_thread().arrive_at_barrier(); }

uint64_t warp_shuffle(const char* call, unsigned mask, uint64_t bits, ShuffleKind kind, int arg, int width) {
  const ShuffleSource source{kind, arg, width};
  return BlockScheduler::of_this_thread().arrive_at_warp_call(call, mask, bits, &source);
}

void syncwarp(unsigned mask) { BlockScheduler::of_this_thread().arrive_at_warp_call("__syncwarp", mask, 0, nullptr); }

cudaError_t launch_grid(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream,
                        std::function<void()> thread_body) {
  const long long threads = static_cast<long long>(block.x) * block.y * block.z;
  if (threads < 1 || threads > 1024 || block.z > 64 || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 ||
      grid.z > 65535) {
    set_diagnostic(std::string(kernel) + ": grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
                   std::to_string(grid.z) + ") of blocks (" + std::to_string(block.x) + ", " + std::to_string(block.y) +
                   ", " + std::to_string(block.z) + ") is not a valid launch configuration");
    set_launch_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  // As on a GPU, a kernel goes to a stream of the current device.
  if (is_stream(stream) && stream_device(stream) != current_device()) {
    set_diagnostic(std::string(kernel) + ": launched on a stream of cuda:" + std::to_string(stream_device(stream)) +
                   " while cuda:" + std::to_string(current_device()) + " is the current device (cudaSetDevice)");
    set_launch_error(cudaErrorInvalidResourceHandle);
    return cudaErrorInvalidResourceHandle;
  }
  auto g = std::make_shared<Grid>(Grid{kernel, grid, block, std::move(thread_body)});
  enqueue(stream, "kernel", kernel, [g] {
    std::string error = BlockPool::instance().run(*g);
    if (!error.empty()) raise_sticky_error(cudaErrorLaunchFailure, error);
  });
  return cudaSuccess;
}

bool check_kernel_pointer(const char* kernel, int index, const void* p) {
  if (!p) return true;
  const std::string what = "argument " + std::to_string(index);
  if (check_device_access(kernel, what.c_str(), p, 1)) return true;
  set_launch_error(cudaErrorInvalidValue);
  return false;
}

}  // namespace nnlab::sim
