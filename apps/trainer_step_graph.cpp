// The Trainer's CUDA-graph step (--cuda-graphs, apps/step_graph.h): what the graph records,
// what the host does before each replay, and the checks and gradients around it.
#include <spdlog/spdlog.h>

#include "apps/trainer.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

Tensor Trainer::forward_backward_for_graph(const Tensor& images, const Tensor& labels) {
  if (pending_gather_) pending_gather_();  // the batch gathered into images and labels, in the graph
  optimizer_->zero_grad();
  if (update_in_graph_) backend_for(device_).increment_counter(step_number_);  // this step's number
  // No non-finite flag on the loss here: the check below covers it (or, when the update stays
  // outside, the one after each replay).
  Tensor loss = cross_entropy(model_->forward_for_loss(images), labels);
  loss.backward();
  if (update_in_graph_) {
    // The loss, then the gradients, in one check, the order eager mode checks them in; the
    // marks' step is read from step_number_ as the check runs. Then the update, which skips
    // itself when the flag is raised.
    const std::vector<Tensor>& params = optimizer_->params();
    std::vector<Tensor> checked{loss};
    std::vector<NonFiniteMark> marks{guard_->loss_mark(1)};
    const std::vector<NonFiniteMark> grad_marks = guard_->gradient_marks(1);
    for (size_t i = 0; i < params.size(); ++i) checked.push_back(params[i].grad()), marks.push_back(grad_marks[i]);
    raise_if_any_not_finite(checked, guard_->flag(), marks, &step_number_);
    optimizer_->record_step();
    backend_for(device_).axpby(1.0, loss, 1.0, loss_sum_);  // the epoch's loss sum
  }
  return loss;
}

void Trainer::stage_graphed_step(int64_t this_step) {
  if (!update_in_graph_) return;
  if (!step_number_current_) backend_for(device_).fill(step_number_, static_cast<double>(this_step - 1));
  step_number_current_ = true;
  schedule_->apply(*optimizer_, global_step_);
  optimizer_->stage_recorded_step(schedule_.get(), global_step_);
}

Tensor Trainer::graphed_forward_backward(const Batch& batch, int64_t this_step) {
  if (!graphed_->fits(batch)) return Tensor();  // the short last batch: eager
  // cuDNN picks its algorithms eagerly first (unless the warm-up did), and a graph that holds
  // the update needs the optimizer's state made by one eager step.
  if (!graphed_->captured() && (eager_full_steps_++ < 1 || (update_in_graph_ && optimizer_->steps_taken() == 0)))
    return Tensor();
  const bool capture_now = !graphed_->captured();
  if (capture_now && update_in_graph_) {
    optimizer_->prepare_recording();
    step_number_ = Tensor::zeros({}, DType::Int32, device_);
    step_number_current_ = false;
  }
  Tensor loss;
  pending_gather_ = batch.gather;
  const bool gather_in_graph = static_cast<bool>(pending_gather_);
  try {
    loss = graphed_->run(batch, [&] { stage_graphed_step(this_step); });
    pending_gather_ = nullptr;
  } catch (const Error& e) {
    pending_gather_ = nullptr;
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
    spdlog::info("CUDA graphs: on, {}{} of each {}-image batch replayed as one graph of {} nodes ({:.1f} MiB of "
                 "device memory kept for it)",
                 gather_in_graph ? "the gather, " : "",
                 update_in_graph_ ? "forward, backward, the finiteness check and the optimizer's update"
                                  : "forward and backward",
                 batch.images.dim(0), graphed_->nodes(), static_cast<double>(graphed_->pool_bytes()) / (1 << 20));
  if (update_in_graph_) return loss;
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
