// Which kernel sums the Linear bias gradient on CUDA, chosen at run time
// (`--reduce-impl auto|uncoalesced|coalesced|tree|shuffle` of train, explain, compare and
// sweep): a ladder of four teaching kernels for db[j] = Σ_rows dy[row, j]
// (devices/cuda/reduce_cuda.cu, docs/backprop-to-kernels.md "A reduction ladder"):
//   auto         the backend's own kernel (the default): slices of every channel summed by
//                as many blocks as fill the GPU, then a second pass adds the slices
//   uncoalesced  one block per column, its threads down the rows: neighbours read c apart
//   coalesced    one thread per column, a block's threads walk each row together
//   tree         32 columns × 32 row groups per block, a shared-memory tree over the groups
//   shuffle      the same loads, the tree's steps as warp shuffles (__shfl_down_sync)
// The rungs sum a Linear layer's bias (inner 1, with or without its ReLU); convolution and
// batch-norm sums keep auto's kernel. The choice is process-wide; the CPU has one bias sum,
// so a rung on the CPU is an error, never a silent fallback: the options refuse it, and so
// does the CPU's bias_backward (which also links this file into every program, as the CUDA
// backend, loaded later, reads the choice from the program).
#pragma once
#include <string>

#include "core/device.h"

namespace nnlab {

enum class ReduceImpl { Auto, Uncoalesced, Coalesced, Tree, Shuffle };

ReduceImpl parse_reduce_impl(const std::string& text);  // "auto" | "uncoalesced" | "coalesced" | "tree" | "shuffle"
const char* reduce_impl_name(ReduceImpl impl);
void set_reduce_impl(ReduceImpl impl);
ReduceImpl reduce_impl();
// Throws an Error when `impl` cannot run on `device`.
void check_reduce_impl(ReduceImpl impl, Device device);

}  // namespace nnlab
