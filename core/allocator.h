// A caching allocator: freed blocks go to a free list keyed by their (rounded) size and are
// handed out again, so a training loop whose shapes repeat stops calling the underlying
// allocator (malloc or cudaMalloc) after its first steps. One instance per device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace nnlab {

struct AllocatorStats {
  size_t current_bytes = 0;          // bytes held by live tensors
  size_t peak_bytes = 0;             // most ever held by live tensors at once
  size_t cached_bytes = 0;           // bytes in free lists, ready for reuse
  uint64_t underlying_allocs = 0;    // calls to the raw allocator
  uint64_t underlying_frees = 0;     // calls to the raw free
};

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(size_t)>;  // returns nullptr when out of memory
  using RawFree = std::function<void(void*)>;

  CachingAllocator(std::string device_name, RawAlloc raw_alloc, RawFree raw_free);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Never returns nullptr: when the raw allocator fails even after the cache was emptied,
  // throws an Error saying how much was asked and how much is in use.
  void* allocate(size_t bytes);
  void deallocate(void* ptr);
  // Returns every cached block to the raw allocator.
  void empty_cache();
  AllocatorStats stats() const;
  void reset_peak();

  // Private pools, for work captured into a CUDA graph. A graph replays its kernels on the
  // addresses they had at capture, so the blocks its step used (even those the step freed
  // again) must not go to anyone else while the graph lives: between begin_capture_pool()
  // and end_capture_pool() every block handed out belongs to a new pool, and a pool block
  // freed at any time goes back to that pool's free list, which serves only the pool's next
  // capture. release_pool() (the graph is destroyed) returns the pool's blocks to the cache.
  int begin_capture_pool();
  void end_capture_pool();
  void release_pool(int pool);
  size_t pool_bytes(int pool) const;  // held by the pool: its free blocks and its live ones

  // Sizes are rounded up to one of four steps per power of two (at least 256 bytes), so
  // blocks of nearby sizes share a free list while waste stays under 25%.
  static size_t round_size(size_t bytes);

  // Under AddressSanitizer, the rounding slack of a live block and the whole of a cached one
  // are poisoned (see allocator.cpp). A device that runs its work asynchronously may still use
  // a block the host has handed back (the next user is later in the same stream), so it passes
  // a function that runs each poisoning step in the device's own order: the CUDA simulator
  // queues it on its stream. Without one, the steps run at once (the CPU).
  using DeviceOrder = std::function<void(std::function<void()>)>;
  void set_device_order(DeviceOrder order);

 private:
  void release_cached_locked();
  void in_device_order(std::function<void()> step);

  std::string device_name_;
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  DeviceOrder device_order_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_blocks_;   // rounded size -> block
  std::map<void*, size_t> live_blocks_;        // block -> rounded size
  std::map<void*, int> block_pool_;            // block -> its private pool (absent: the shared cache)
  std::map<int, std::multimap<size_t, void*>> pool_free_;  // pool -> its free blocks
  int capturing_pool_ = 0;                     // the pool of the capture under way, 0 for none
  int next_pool_ = 1;
  AllocatorStats stats_;
};

}  // namespace nnlab
