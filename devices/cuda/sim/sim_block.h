// One block of a grid on the CUDA simulator: its threads on fibers, the barrier they meet at
// (__syncthreads), and the warps their lanes meet in (__shfl_*_sync, __syncwarp).
// sim_threads.cpp runs the block and its barriers; sim_warps.cpp the warps' calls.
// Used by those two files only.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "devices/cuda/sim/sim_fiber.h"

#if defined(__SANITIZE_THREAD__)
#define NNLAB_SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NNLAB_SIM_TSAN 1
#endif
#endif
#ifdef NNLAB_SIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace nnlab::sim {

struct Grid {
  const char* kernel;
  dim3 grid, block;
  std::function<void()> body;
};

// Which lane a shuffle reads, before the rules of its mask are applied (sim_warps.cpp).
struct ShuffleSource {
  ShuffleKind kind;
  int arg;    // the source lane (Index), the distance (Up, Down) or the lane mask (Xor)
  int width;  // the lanes are split into segments of `width`; a shuffle stays inside its own
};

// One block at a time on one CPU thread. Fibers write what the scheduler reads through relaxed
// atomics: the two share a CPU thread, so no ordering is needed, and ThreadSanitizer must not
// see the bookkeeping as an order between CUDA threads.
class BlockScheduler {
 public:
  // Runs block `linear_block` of `g`; returns "" or what went wrong (the first misuse of a
  // barrier or a warp call).
  std::string run(const Grid& g, long long linear_block);
  static BlockScheduler& of_this_thread() {
    thread_local BlockScheduler scheduler;
    return scheduler;
  }
  void arrive_at_barrier();
  // A lane's warp call: waits until every lane its mask names that has not exited made the
  // same call with the same mask; returns the bits the source lane gave (a shuffle) or 0.
  uint64_t arrive_at_warp_call(const char* call, unsigned mask, uint64_t bits, const ShuffleSource* source);

 private:
  struct Worker {
    std::unique_ptr<Fiber> fiber;
    ThreadCoordinates coords;
    BlockScheduler* owner = nullptr;
    std::atomic<bool> ended{false};
  };
  // A thread waiting at a warp call, by thread index (worker null when not waiting).
  struct LaneCall {
    std::atomic<Worker*> worker{nullptr};
    std::atomic<const char*> call{nullptr};
    std::atomic<unsigned> mask{0};
    std::atomic<int> source{-1};  // the thread index it reads, -1: its own value
    std::atomic<uint64_t> bits{0}, result{0};
  };
  static void worker_main(void* raw);
  Worker& idle_worker();
  void resume(Worker& w);
  int thread_index(const Worker& w) const;
  void report(std::string error);  // keeps the first error of the block
  // sim_warps.cpp
  void reset_warps();
  void lane_exited(int index);
  bool try_complete(int index);  // the meeting of the lane waiting at `index`, if all are there
  std::string describe_stuck_warp_call() const;
  void abandon_warp_calls();
  std::vector<Worker*> take_ready_lanes();

  const Grid* grid_ = nullptr;
  dim3 block_idx_;
  int threads_ = 0;
  std::atomic<std::string*> error_{nullptr};  // the block's first error (report)
  std::atomic<int> next_unstarted_{0}, exited_{0};
  std::vector<std::unique_ptr<Worker>> workers_;   // fibers, reused from block to block
  std::vector<Worker*> idle_;
  std::vector<Worker*> ended_;  // under ThreadSanitizer: ended in this block, idle after it
  std::vector<std::atomic<Worker*>> at_barrier_;   // by thread index, null when not waiting
  std::atomic<int> waiting_{0};
  std::atomic<Worker*> running_{nullptr};  // set by the scheduler, read by the running fiber
  char barrier_token_ = 0;  // ThreadSanitizer's sync object for the barrier
  char done_token_ = 0;     // ... and for "every thread of the block has ended"
  // ... released at every wait, acquired only after an error, before the waiting fibers are
  // abandoned and their objects reused: what they did is then ordered before the reuse.
  char abandon_token_ = 0;
  // Warps (sim_warps.cpp): the lanes' calls, which threads have exited, the lanes of
  // completed calls in the order they resume, and a sync object per warp for __syncwarp.
  std::vector<LaneCall> lanes_;
  std::vector<std::atomic<bool>> exited_lanes_;
  std::vector<std::atomic<Worker*>> ready_;  // ready_count_ of them, appended by fibers
  std::atomic<int> ready_count_{0};
  std::atomic<int> at_warp_calls_{0};
  std::vector<char> warp_tokens_;
};

}  // namespace nnlab::sim
