// --batch-slices S: data parallelism inside one process, on the CPU.
//
// The usual CPU step runs each op over the whole batch with all threads (one parallel region
// per op). With S slices the batch of B samples is cut as a data-parallel run cuts it over S
// ranks (slice s: samples [⌊B·s/S⌋, ⌊B·(s+1)/S⌋)), and each slice runs forward, loss and
// backward alone on one thread, on a replica of the model whose weights are the model's own
// (shared memory, no copy) and whose gradients are its own. The OpenMP threads take the slices
// one at a time; then the gradients are summed in slice order,
//
//   g = Σ_s (b_s / B) · g_s,     loss = Σ_s (b_s / B) · loss_s,
//
// into the model's .grad, and the optimizer steps once, as without slices. Each slice's
// arithmetic is single-threaded and the sum's order is fixed, so a run repeats bit for bit
// whatever the thread count; it differs from the unsliced step only by the order of the sums
// over the batch (docs/cpu-kernels.md, "Batch slices").
//
// A slice keeps its activations in its own core's caches from forward to backward, and the
// step has S parallel regions' worth of waiting instead of one per op: what pays on many cores.
// Models with BatchNorm (each slice would normalise by its own statistics: another model) or
// Dropout are refused, as are CUDA (the GPU runs the whole batch) and --check-numerics.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/nonfinite.h"
#include "core/tensor.h"
#include "layers/sequential.h"

namespace nnlab {

struct Batch;

class BatchSlices {
 public:
  // model: the trained model (slice 0 runs on it); replica(): a new model of the same
  // architecture, epilogues fused as the model's (its weights are replaced by the model's).
  BatchSlices(int slices, Sequential& model, const std::function<std::shared_ptr<Sequential>()>& replica);

  // Why a model or run cannot be sliced ("" when it can).
  static std::string obstacle(const Module& model, const Device& device, bool check_numerics, int ranks);

  // Forward, loss and backward of the whole batch, slice by slice; afterwards the model's
  // gradients are the batch's mean gradient. flag/mark: the non-finite flag (core/nonfinite.h)
  // and the mark a non-finite loss stores in it (a slice's first, in slice order). Returns the
  // batch's mean loss.
  Tensor forward_backward(const Batch& batch, Tensor& flag, NonFiniteMark mark);

  int slices() const { return static_cast<int>(replicas_.size()); }

 private:
  std::vector<Sequential*> replicas_;                 // replicas_[0] is the model itself
  std::vector<std::shared_ptr<Sequential>> owned_;    // replicas 1 .. S − 1
  std::vector<std::vector<Tensor>> parameters_;       // each replica's, in parameters() order
  std::vector<Tensor> flags_, losses_;                // each slice's own flag and loss
};

}  // namespace nnlab
