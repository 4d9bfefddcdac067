// Transparent huge pages for large blocks: the host's (host_memory.cpp) and the CUDA
// simulator's device memory (devices/cuda/sim/sim_runtime.cpp).
//
// Why: a block of at least kHugePageMinBlock bytes (a data set, a batch of large activations)
// starts on a 2 MiB boundary and is marked MADV_HUGEPAGE (Debian's default THP mode, "madvise",
// uses huge pages only when asked). Touching it then costs one page fault per 2 MiB instead of
// one per 4 KiB: CIFAR-10's 150 MiB of bytes took 0.7 s of faults at start-up on the 2-core
// Zen 5 (a one-step run 1.01 → 0.29 s), the 614 MiB of synthetic-cifar10 floats several
// seconds. A huge page is backed whole once touched, so small blocks stay on ordinary pages:
// from 16 MiB up the rounding to 2 MiB wastes at most 1/8.
#pragma once
#include <sys/mman.h>

#include <cstddef>

namespace nnlab {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageMinBlock = size_t{16} << 20;

inline bool wants_huge_pages(size_t bytes) { return bytes >= kHugePageMinBlock; }

// Marks the whole 2 MiB pages of [p, p + bytes) for huge pages; p is 2 MiB-aligned. Advice
// only: where the kernel declines, the block keeps ordinary pages.
inline void advise_huge_pages(void* p, size_t bytes) { madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE); }

}  // namespace nnlab
