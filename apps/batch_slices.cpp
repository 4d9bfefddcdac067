#include "apps/batch_slices.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "datasets/dataloader.h"
#include "devices/registry.h"
#include "layers/batchnorm.h"
#include "layers/dropout.h"

namespace nnlab {

namespace {

// The first layer of `m` (itself or a descendant) that slices would change, with its name.
std::string layer_slices_change(const Module& m, const std::string& name) {
  if (dynamic_cast<const BatchNorm2d*>(&m))
    return "it has BatchNorm ('" + name + "'): each slice would normalise by its own statistics, another model";
  if (dynamic_cast<const Dropout*>(&m))
    return "it has Dropout ('" + name + "'): its masks are drawn for the whole batch";
  for (const auto& [child_name, child] : m.children()) {
    const std::string found = layer_slices_change(*child, name.empty() ? child_name : name + "." + child_name);
    if (!found.empty()) return found;
  }
  return "";
}

}  // namespace

std::string BatchSlices::obstacle(const Module& model, const Device& device, bool check_numerics, int ranks) {
  if (!device.is_cpu()) return "the run is on " + device.str() + ", where the GPU runs the whole batch at once";
  if (check_numerics) return "--check-numerics follows one forward pass layer by layer";
  if (ranks > 1) return "the ranks of a data-parallel run slice the batch already";
  const std::string layer = layer_slices_change(model, "");
  return layer.empty() ? "" : "the model cannot be sliced: " + layer;
}

BatchSlices::BatchSlices(int slices, Sequential& model, const std::function<std::shared_ptr<Sequential>()>& replica) {
  // A slice's ops must stay on its thread: an OpenMP region an op opens inside a slice runs on
  // that thread alone instead of starting a team of its own. The CPU kernels split their work
  // by the team they get (omp_get_num_threads) or run on one thread inside a region
  // (omp_in_parallel), so they compute the same values there.
  omp_set_max_active_levels(1);
  replicas_.push_back(&model);
  parameters_.push_back(model.parameters());
  for (int s = 1; s < slices; ++s) {
    owned_.push_back(replica());
    replicas_.push_back(owned_.back().get());
    parameters_.push_back(owned_.back()->parameters());
    // The replica's weights become the model's: the same memory, so each optimizer step (in
    // place) reaches every slice; its gradients stay its own (Tensor::grad lives in the handle).
    NNLAB_CHECK(parameters_.back().size() == parameters_[0].size(), "--batch-slices: a replica of the model has ",
                parameters_.back().size(), " parameters, the model ", parameters_[0].size());
    for (size_t i = 0; i < parameters_[0].size(); ++i) {
      const Tensor& own = parameters_[0][i];
      Tensor& copy = parameters_.back()[i];
      NNLAB_CHECK(copy.shape() == own.shape() && copy.dtype() == own.dtype(),
                  "--batch-slices: a replica's parameter ", copy.describe(), " is not the model's ", own.describe());
      copy.impl_ptr()->storage = own.impl_ptr()->storage;
      copy.impl_ptr()->offset_bytes = own.impl_ptr()->offset_bytes;
    }
  }
  for (int s = 0; s < slices; ++s) flags_.push_back(Tensor::zeros({kNonFiniteFlagSize}, DType::Int32));
  losses_.resize(static_cast<size_t>(slices));
}

Tensor BatchSlices::forward_backward(const Batch& batch, Tensor& flag, NonFiniteMark mark) {
  // A short last batch with fewer samples than slices: one slice a sample.
  const int64_t b = batch.images.dim(0), slices = std::min(static_cast<int64_t>(replicas_.size()), b);
  for (size_t s = 1; s < replicas_.size(); ++s)
    for (Tensor& p : parameters_[s]) p.set_grad(Tensor());
  const auto first = [&](int64_t s) { return b * s / slices; };
  // One slice a thread at a time, each op of a slice single-threaded (an OpenMP region inside
  // this one runs on the thread that meets it). An error may not leave the region: the first,
  // in slice order, is rethrown after it.
  std::vector<std::exception_ptr> errors(static_cast<size_t>(slices));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t s = 0; s < slices; ++s) {
    try {
      GradMode::set_enabled(true);  // each thread keeps its own; a slice records its graph
      const Tensor images = batch.images.rows(first(s), first(s + 1));
      const Tensor labels = batch.labels.rows(first(s), first(s + 1));
      Tensor& slice_flag = flags_[static_cast<size_t>(s)];
      slice_flag.fill_(0);
      const Tensor logits = replicas_[static_cast<size_t>(s)]->forward_for_loss(images);
      Tensor loss = cross_entropy(logits, labels, &slice_flag, mark);
      loss.backward();
      losses_[static_cast<size_t>(s)] = loss.detach();
    } catch (...) {
      errors[static_cast<size_t>(s)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  // A non-finite loss: the first slice's mark, unless the flag was raised before.
  int32_t* raised = flag.data<int32_t>();
  for (int64_t s = 0; s < slices && raised[0] == 0; ++s) {
    const int32_t* slice_flag = flags_[static_cast<size_t>(s)].data<int32_t>();
    if (slice_flag[0] != 0) std::copy_n(slice_flag, kNonFiniteFlagSize, raised);
  }
  // g = Σ_s (b_s / B) · g_s in slice order, into the model's own gradients (slice 0's).
  Backend& cpu = backend_for(Device::cpu());
  const auto weight = [&](int64_t s) { return static_cast<double>(first(s + 1) - first(s)) / static_cast<double>(b); };
  for (size_t i = 0; i < parameters_[0].size(); ++i) {
    Tensor grad = parameters_[0][i].grad();
    if (!grad.defined()) continue;  // a parameter the loss does not reach
    for (int64_t s = 1; s < slices; ++s)
      cpu.axpby(weight(s), parameters_[static_cast<size_t>(s)][i].grad(), s == 1 ? weight(0) : 1.0, grad);
  }
  double loss = 0;
  for (int64_t s = 0; s < slices; ++s) loss += weight(s) * losses_[static_cast<size_t>(s)].item();
  return Tensor::full({}, loss, DType::Float32, Device::cpu());
}

}  // namespace nnlab
