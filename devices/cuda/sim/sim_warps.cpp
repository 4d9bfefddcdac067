// Warps on the CUDA simulator: __shfl_sync, __shfl_up_sync, __shfl_down_sync, __shfl_xor_sync
// and __syncwarp, with CUDA's rules checked.
//
// A block's threads form warps of 32 in linear thread order (threadIdx.x first), so lane =
// index % 32 and a block of 48 threads has a full warp and one of 16 lanes. A warp call names
// its lanes in a mask. The calling lane records what it gives (its value, the lane it reads)
// and suspends its fiber, as at __syncthreads(); the call is complete when every lane the mask
// names has arrived at the same call with the same mask, except lanes that have exited or lie
// past the end of the block (CUDA requires only the named lanes "that have not exited"). Then
// each lane gets the value of the lane it reads, and they all resume, in lane order, before
// any other thread runs: the warp goes on in lockstep.
//
// CUDA's rules, reported as the launch's error with the kernel, block, warp and lanes named:
//   - a lane calls with a mask that does not name itself;
//   - a named lane that has not exited never makes the call (it waits at __syncthreads(), or
//     at a warp call with another mask): found, as a barrier's divergence is, when no thread
//     of the block can go on, so a mistake never hangs the simulator;
//   - a width that is not a power of two up to 32.
// What CUDA leaves undefined but allowed, a shuffle reading a lane outside the mask, exited
// or past the block, gives all-ones bits (a NaN in a float): a sum that uses it shows it.
//
// Under ThreadSanitizer __syncwarp() orders the lanes' memory accesses as a barrier of the
// warp does; a shuffle orders nothing (on a GPU it moves registers, not memory), so shared
// memory handed over with shuffles alone is still reported as a race.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_block.h"

namespace nnlab::sim {

namespace {

constexpr int kWarp = 32;
constexpr uint64_t kUndefined = ~uint64_t(0);

// The lane (0..31) a shuffle reads, or -1 for the caller's own value (a source outside its
// segment of `width` lanes: CUDA's defined rule).
int source_lane(int lane, const ShuffleSource& s) {
  const int w = s.width, first = lane & ~(w - 1), offset = lane - first;
  switch (s.kind) {
    case ShuffleKind::Index: return first + (s.arg & (w - 1));
    case ShuffleKind::Up: return s.arg >= 0 && offset >= s.arg ? lane - s.arg : -1;
    case ShuffleKind::Down: return s.arg >= 0 && offset + s.arg < w ? lane + s.arg : -1;
    case ShuffleKind::Xor: {
      const int src = lane ^ s.arg;  // an earlier segment may be read, a later one not
      return src >= 0 && src < first + w ? src : -1;
    }
  }
  return -1;
}

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

// "lane 5", "lanes 0-4, 6-31"
std::string lanes_text(const std::vector<int>& lanes) {
  std::string out = lanes.size() == 1 ? "lane " : "lanes ";
  for (size_t i = 0; i < lanes.size();) {
    size_t j = i;
    while (j + 1 < lanes.size() && lanes[j + 1] == lanes[j] + 1) ++j;
    out += (i ? ", " : "") + std::to_string(lanes[i]) + (j > i ? "-" + std::to_string(lanes[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace

void BlockScheduler::reset_warps() {
  if (lanes_.size() < static_cast<size_t>(threads_)) {
    lanes_ = std::vector<LaneCall>(threads_);
    exited_lanes_ = std::vector<std::atomic<bool>>(threads_);
    ready_ = std::vector<std::atomic<Worker*>>(threads_);
  }
  for (int i = 0; i < threads_; ++i) {
    lanes_[i].worker.store(nullptr, std::memory_order_relaxed);
    exited_lanes_[i].store(false, std::memory_order_relaxed);
  }
  ready_count_ = 0;
  at_warp_calls_ = 0;
  warp_tokens_.assign(static_cast<size_t>((threads_ + kWarp - 1) / kWarp), 0);
}

uint64_t BlockScheduler::arrive_at_warp_call(const char* call, unsigned mask, uint64_t bits,
                                             const ShuffleSource* source) {
  Worker& w = *running_.load(std::memory_order_relaxed);
  const int index = thread_index(w), lane = index % kWarp, warp = index / kWarp;
  auto where = [&] {
    return std::string(call) + " in thread " + std::to_string(index) + " (warp " + std::to_string(warp) + ", lane " +
           std::to_string(lane) + ")";
  };
  if (!(mask >> lane & 1u)) {
    report(where() + " with mask " + hex(mask) + ", which does not name the calling lane: each lane must set its own bit");
    return bits;
  }
  if (source && (source->width < 1 || source->width > kWarp || (source->width & (source->width - 1)))) {
    report(where() + " with width " + std::to_string(source->width) + ": the width must be a power of two up to 32");
    return bits;
  }
  const int src = source ? source_lane(lane, *source) : -1;
  LaneCall& me = lanes_[index];
  me.call.store(call, std::memory_order_relaxed);
  me.mask.store(mask, std::memory_order_relaxed);
  me.source.store(src < 0 ? -1 : warp * kWarp + src, std::memory_order_relaxed);
  me.bits.store(bits, std::memory_order_relaxed);
  me.result.store(bits, std::memory_order_relaxed);
  me.worker.store(&w, std::memory_order_relaxed);
  at_warp_calls_.fetch_add(1, std::memory_order_relaxed);
  try_complete(index);
#ifdef NNLAB_SIM_TSAN
  if (!source) __tsan_release(&warp_tokens_[warp]);
  __tsan_release(&abandon_token_);
#endif
  Fiber::thread_fiber().switch_from(*w.fiber);  // the scheduler resumes the lane once complete
#ifdef NNLAB_SIM_TSAN
  if (!source) __tsan_acquire(&warp_tokens_[warp]);
#endif
  current_thread.store(&w.coords, std::memory_order_relaxed);
  return me.result.load(std::memory_order_relaxed);
}

bool BlockScheduler::try_complete(int index) {
  const LaneCall& me = lanes_[index];
  const unsigned mask = me.mask.load(std::memory_order_relaxed);
  const char* call = me.call.load(std::memory_order_relaxed);
  const int first = index / kWarp * kWarp;
  auto excused = [&](int t) { return t >= threads_ || exited_lanes_[t].load(std::memory_order_relaxed); };
  int members[kWarp], count = 0;  // the lanes that meet: named, not excused, all arrived
  for (int lane = 0; lane < kWarp; ++lane) {
    const int t = first + lane;
    if (!(mask >> lane & 1u) || excused(t)) continue;
    const LaneCall& other = lanes_[t];
    if (!other.worker.load(std::memory_order_relaxed) || other.mask.load(std::memory_order_relaxed) != mask ||
        std::strcmp(other.call.load(std::memory_order_relaxed), call) != 0)
      return false;
    members[count++] = t;
  }
  for (int m = 0; m < count; ++m) {
    const int t = members[m];
    const int src = lanes_[t].source.load(std::memory_order_relaxed);
    if (src < 0) continue;  // its own value, already in result
    const bool defined = (mask >> (src - first) & 1u) && !excused(src);
    lanes_[t].result.store(defined ? lanes_[src].bits.load(std::memory_order_relaxed) : kUndefined,
                           std::memory_order_relaxed);
  }
  for (int m = 0; m < count; ++m) {
    ready_[ready_count_.fetch_add(1, std::memory_order_relaxed)].store(
        lanes_[members[m]].worker.exchange(nullptr, std::memory_order_relaxed), std::memory_order_relaxed);
    at_warp_calls_.fetch_sub(1, std::memory_order_relaxed);
  }
  return true;
}

// A lane that exits no longer holds back the calls of its warp that name it.
void BlockScheduler::lane_exited(int index) {
  exited_lanes_[index].store(true, std::memory_order_relaxed);
  // Most kernels make no warp call: nothing waits, and the exit costs one load, not 32.
  if (at_warp_calls_.load(std::memory_order_relaxed) == 0) return;
  const int first = index / kWarp * kWarp, bit = index % kWarp;
  for (int t = first; t < first + kWarp && t < threads_; ++t)
    if (lanes_[t].worker.load(std::memory_order_relaxed) && (lanes_[t].mask.load(std::memory_order_relaxed) >> bit & 1u))
      try_complete(t);
}

// The first lane still waiting at a warp call, which lanes of its mask never came and where
// they wait instead.
std::string BlockScheduler::describe_stuck_warp_call() const {
  int index = 0;
  while (index < threads_ && !lanes_[index].worker.load(std::memory_order_relaxed)) ++index;
  const LaneCall& me = lanes_[index];
  const unsigned mask = me.mask.load(std::memory_order_relaxed);
  const std::string call = me.call.load(std::memory_order_relaxed);
  const int first = index / kWarp * kWarp;
  std::vector<int> arrived, at_barrier;
  std::vector<std::pair<std::string, std::vector<int>>> elsewhere;  // another warp call, by call
  for (int lane = 0; lane < kWarp; ++lane) {
    const int t = first + lane;
    if (!(mask >> lane & 1u) || t >= threads_ || exited_lanes_[t].load(std::memory_order_relaxed)) continue;
    const LaneCall& other = lanes_[t];
    if (at_barrier_[t].load(std::memory_order_relaxed)) {
      at_barrier.push_back(lane);
    } else if (!other.worker.load(std::memory_order_relaxed)) {
      continue;  // not waiting anywhere: cannot be when the block is stuck
    } else if (other.mask.load(std::memory_order_relaxed) == mask && call == other.call.load(std::memory_order_relaxed)) {
      arrived.push_back(lane);
    } else {
      const std::string there = std::string(other.call.load(std::memory_order_relaxed)) + " with mask " +
                                hex(other.mask.load(std::memory_order_relaxed));
      auto it = elsewhere.begin();
      while (it != elsewhere.end() && it->first != there) ++it;
      if (it == elsewhere.end()) it = elsewhere.insert(it, {there, {}});
      it->second.push_back(lane);
    }
  }
  std::string missing;
  if (!at_barrier.empty()) missing = lanes_text(at_barrier) + " at __syncthreads()";
  for (const auto& [there, lanes] : elsewhere) missing += (missing.empty() ? "" : ", ") + lanes_text(lanes) + " at " + there;
  return "warp " + std::to_string(first / kWarp) + ": " + call + " with mask " + hex(mask) + " was reached by " +
         lanes_text(arrived) + ", but the mask also names " + missing +
         " (every lane a mask names that has not exited must make the same call with the same mask)";
}

// The lanes of the calls completed since the last take, in the order they completed.
std::vector<BlockScheduler::Worker*> BlockScheduler::take_ready_lanes() {
  std::vector<Worker*> lanes(static_cast<size_t>(ready_count_.exchange(0, std::memory_order_relaxed)));
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i] = ready_[i].load(std::memory_order_relaxed);
  return lanes;
}

void BlockScheduler::abandon_warp_calls() {
  for (int t = 0; t < threads_; ++t)
    if (Worker* w = lanes_[t].worker.exchange(nullptr, std::memory_order_relaxed)) idle_.push_back(w);
  at_warp_calls_ = 0;
}

}  // namespace nnlab::sim
