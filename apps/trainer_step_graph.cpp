// The Trainer's CUDA-graph step (--cuda-graphs, apps/step_graph.h): what the graph records,
// and the replay with the checks and the gradients around it.
#include <spdlog/spdlog.h>

#include "apps/trainer.h"
#include "autograd/ops.h"

namespace nnlab {

Tensor Trainer::forward_backward_for_graph(const Tensor& images, const Tensor& labels) {
  optimizer_->zero_grad();
  // No non-finite flag here: its mark names the step, which a replay would not update; the
  // loss is checked after each replay instead (graphed_forward_backward).
  Tensor loss = cross_entropy(model_->forward(images), labels);
  loss.backward();
  return loss;
}

Tensor Trainer::graphed_forward_backward(const Batch& batch, int64_t this_step) {
  if (!graphed_->fits(batch)) return Tensor();  // the short last batch: eager
  if (!graphed_->captured() && eager_full_steps_++ < 1) return Tensor();  // cuDNN picks its algorithms eagerly first
  const bool capture_now = !graphed_->captured();
  Tensor loss;
  try {
    loss = graphed_->run(batch);
  } catch (const Error& e) {
    if (graphs_mode_ == CudaGraphs::On || !capture_now) throw;
    spdlog::warn("CUDA graphs: off, the step could not be captured: {}", e.what());
    graphed_.reset();
    return Tensor();
  }
  // The graph writes its own gradient buffers: the parameters point at them again (an eager
  // step in between, the short last batch, gave them others).
  std::vector<Tensor> params = optimizer_->params();
  if (capture_now)
    for (const Tensor& p : params) graph_grads_.push_back(p.grad());
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(graph_grads_[i]);
  if (capture_now)
    spdlog::info("CUDA graphs: on, forward and backward of each {}-image batch replayed as one graph of {} nodes "
                 "({:.1f} MiB of device memory kept for it)",
                 batch.images.dim(0), graphed_->nodes(), static_cast<double>(graphed_->pool_bytes()) / (1 << 20));
  // The loss, then (unless clipping checks them apart) the gradients, in one check: the order
  // eager mode checks them in, so the first bad one names the fault as it would there.
  std::vector<Tensor> checked{loss};
  std::vector<NonFiniteMark> marks{guard_->loss_mark(this_step)};
  if (config_.clip_grad_norm <= 0) {
    const std::vector<NonFiniteMark> grad_marks = guard_->gradient_marks(this_step);
    for (size_t i = 0; i < params.size(); ++i) checked.push_back(params[i].grad()), marks.push_back(grad_marks[i]);
  }
  raise_if_any_not_finite(checked, guard_->flag(), marks);
  return loss;
}

}  // namespace nnlab
