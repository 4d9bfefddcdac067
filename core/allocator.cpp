#include "core/allocator.h"

#include "core/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNLAB_ALLOCATOR_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NNLAB_ALLOCATOR_ASAN 1
#endif
#ifdef NNLAB_ALLOCATOR_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace nnlab {

namespace {

// Under AddressSanitizer the cache hides what ASan would see with plain malloc: the rounding
// slack after a tensor and a freed block kept for reuse are both still "allocated" memory.
// Poisoning them makes an access one element past a tensor, or to a tensor already handed
// back, an ASan report on any device whose memory the host can see (the CPU and the CUDA
// simulator), as compute-sanitizer reports it on a GPU.
void poison(void* p, size_t bytes) {
#ifdef NNLAB_ALLOCATOR_ASAN
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}
void unpoison(void* p, size_t bytes) {
#ifdef NNLAB_ALLOCATOR_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace

CachingAllocator::CachingAllocator(std::string device_name, RawAlloc raw_alloc, RawFree raw_free)
    : device_name_(std::move(device_name)), raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= 256) return 256;
  // Find the power of two p with p < bytes <= 2p, then round up to a multiple of p/4.
  size_t p = 256;
  while (p * 2 < bytes) p *= 2;
  const size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  auto own = capturing_pool_ ? pool_free_[capturing_pool_].find(size) : free_blocks_.end();
  auto it = free_blocks_.find(size);
  if (capturing_pool_ && own != pool_free_[capturing_pool_].end()) {  // the pool's own block first
    ptr = own->second;
    pool_free_[capturing_pool_].erase(own);
    stats_.cached_bytes -= size;
  } else if (it != free_blocks_.end()) {
    ptr = it->second;
    free_blocks_.erase(it);
    stats_.cached_bytes -= size;
  } else {
    ptr = raw_alloc_(size);
    if (!ptr && !free_blocks_.empty()) {  // give the cache back and try once more
      release_cached_locked();
      ptr = raw_alloc_(size);
    }
    if (!ptr)
      fail("out of memory on ", device_name_, ": asked for ", bytes, " bytes while ", stats_.current_bytes,
           " bytes are in use (peak ", stats_.peak_bytes, "); try a smaller --batch or a smaller model");
    ++stats_.underlying_allocs;
  }
  in_device_order([ptr, bytes, size] {
    unpoison(ptr, bytes);
    poison(static_cast<char*>(ptr) + bytes, size - bytes);
  });
  live_blocks_[ptr] = size;
  if (capturing_pool_) block_pool_[ptr] = capturing_pool_;
  stats_.current_bytes += size;
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_blocks_.find(ptr);
  if (it == live_blocks_.end()) return;
  const size_t size = it->second;
  live_blocks_.erase(it);
  stats_.current_bytes -= size;
  stats_.cached_bytes += size;
  in_device_order([ptr, size] { poison(ptr, size); });
  auto pool = block_pool_.find(ptr);
  if (pool != block_pool_.end())
    pool_free_[pool->second].emplace(size, ptr);
  else
    free_blocks_.emplace(size, ptr);
}

int CachingAllocator::begin_capture_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  NNLAB_CHECK(capturing_pool_ == 0, "allocator on ", device_name_, ": a capture is under way already");
  capturing_pool_ = next_pool_++;
  pool_free_[capturing_pool_];
  return capturing_pool_;
}

void CachingAllocator::end_capture_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_pool_ = 0;
}

void CachingAllocator::release_pool(int pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_pool_ == pool) capturing_pool_ = 0;
  auto free = pool_free_.find(pool);
  if (free == pool_free_.end()) return;
  for (const auto& [size, ptr] : free->second) {
    block_pool_.erase(ptr);
    free_blocks_.emplace(size, ptr);
  }
  pool_free_.erase(free);
  for (auto it = block_pool_.begin(); it != block_pool_.end();)  // live blocks go to the cache when freed
    it = it->second == pool ? block_pool_.erase(it) : std::next(it);
}

size_t CachingAllocator::pool_bytes(int pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const auto& [ptr, p] : block_pool_)
    if (p == pool) {
      auto live = live_blocks_.find(ptr);
      if (live != live_blocks_.end()) bytes += live->second;
    }
  auto free = pool_free_.find(pool);
  if (free != pool_free_.end())
    for (const auto& [size, ptr] : free->second) bytes += size;
  return bytes;
}

void CachingAllocator::set_device_order(DeviceOrder order) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_order_ = std::move(order);
}

void CachingAllocator::in_device_order(std::function<void()> step) {
#ifdef NNLAB_ALLOCATOR_ASAN
  if (device_order_)
    device_order_(std::move(step));
  else
    step();
#else
  (void)step;  // nothing to poison without AddressSanitizer
#endif
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, ptr] : free_blocks_) {
    in_device_order([ptr = ptr, size = size] { unpoison(ptr, size); });  // runs before the free: cudaFree waits for the device
    raw_free_(ptr);
    ++stats_.underlying_frees;
  }
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
}

}  // namespace nnlab
