#include "apps/step_graph.h"

#include "core/error.h"
#include "devices/registry.h"
#include "layers/dropout.h"

namespace nnlab {

CudaGraphs parse_cuda_graphs(const std::string& text) {
  if (text == "auto") return CudaGraphs::Auto;
  if (text == "on") return CudaGraphs::On;
  if (text == "off") return CudaGraphs::Off;
  fail("--cuda-graphs must be auto, on or off, not '", text, "'");
}

namespace {
bool has_dropout(Module& m) {
  if (dynamic_cast<Dropout*>(&m)) return true;
  for (const auto& [name, child] : m.children())
    if (has_dropout(*child)) return true;
  return false;
}
}  // namespace

std::string graph_obstacle(const Device& device, Module& model, bool check_numerics, bool distributed) {
  if (!device.is_cuda()) return "the step runs on " + device.str() + ", and graphs are CUDA's";
  if (has_dropout(model))
    return "the model has a Dropout layer, whose mask seed changes every step as a host argument a graph would "
           "freeze";
  if (check_numerics) return "--check-numerics reads every layer's output back to the host";
  if (distributed) return "the gradients' all-reduce over the ranks runs inside the step";
  return "";
}

GraphedStep::GraphedStep(const Device& device, Body body) : device_(device), body_(std::move(body)) {}

bool GraphedStep::fits(const Batch& batch) const {
  if (!images_.defined()) return true;
  return batch.images.shape() == images_.shape() && batch.labels.shape() == labels_.shape();
}

Tensor GraphedStep::run(const Batch& batch) {
  NNLAB_CHECK(fits(batch), "GraphedStep: batch ", batch.images.describe(), " is not the captured shape ",
              images_.describe());
  if (!images_.defined()) {
    images_ = Tensor::empty(batch.images.shape(), batch.images.dtype(), device_);
    labels_ = Tensor::empty(batch.labels.shape(), batch.labels.dtype(), device_);
  }
  Backend& backend = backend_for(device_);
  backend.copy(batch.images, images_);
  backend.copy(batch.labels, labels_);
  if (!graph_) graph_ = backend.capture([this] { loss_ = body_(images_, labels_).detach(); });
  graph_->replay();
  return loss_;
}

}  // namespace nnlab
