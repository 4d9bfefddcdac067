#include "apps/step_graph.h"

#include "core/error.h"
#include "devices/registry.h"

namespace nnlab {

CudaGraphs parse_cuda_graphs(const std::string& text) {
  if (text == "auto") return CudaGraphs::Auto;
  if (text == "on") return CudaGraphs::On;
  if (text == "off") return CudaGraphs::Off;
  fail("--cuda-graphs must be auto, on or off, not '", text, "'");
}

std::string graph_obstacle(const Device& device, bool check_numerics, bool distributed) {
  if (!device.is_cuda()) return "the step runs on " + device.str() + ", and graphs are CUDA's";
  if (check_numerics) return "--check-numerics reads every layer's output back to the host";
  if (distributed) return "the gradients' all-reduce over the ranks runs inside the step";
  return "";
}

// --data-on-device: whether the training set lives on the GPU for the run (the loader's
// `resident`), or why it cannot where the user asked for it.
bool use_data_on_device(const TrainConfig& c, const Device& device, const Dataset& train, int ranks) {
  NNLAB_CHECK(c.data_on_device == "auto" || c.data_on_device == "on" || c.data_on_device == "off",
              "--data-on-device must be auto, on or off, not '", c.data_on_device, "'");
  if (c.data_on_device == "off") return false;
  const double gib = static_cast<double>(train.images.nbytes()) / double(1 << 30);  // as stored
  std::string obstacle;
  if (!device.is_cuda()) obstacle = "the run is on " + device.str();
  else if (ranks > 1) obstacle = "each rank of a data-parallel run loads its own share";
  else if (c.data_on_device == "auto" && gib > 2.0) obstacle = "the set takes more than 2 GiB";
  NNLAB_CHECK(obstacle.empty() || c.data_on_device != "on", "--data-on-device on: ", obstacle,
              " (use --data-on-device auto or off)");
  return obstacle.empty();
}

GraphedStep::GraphedStep(const Device& device, Body body) : device_(device), body_(std::move(body)) {}

bool GraphedStep::fits(const Batch& batch) const {
  if (!images_.defined()) return true;
  return batch.images.shape() == images_.shape() && batch.labels.shape() == labels_.shape();
}

Tensor GraphedStep::run(const Batch& batch, const std::function<void()>& before_replay) {
  NNLAB_CHECK(fits(batch), "GraphedStep: batch ", batch.images.describe(), " is not the captured shape ",
              images_.describe());
  if (!images_.defined()) {  // the loader's own fixed memory, or buffers of the graph's own
    images_ = batch.fixed_storage ? batch.images : Tensor::empty(batch.images.shape(), batch.images.dtype(), device_);
    labels_ = batch.fixed_storage ? batch.labels : Tensor::empty(batch.labels.shape(), batch.labels.dtype(), device_);
  }
  Backend& backend = backend_for(device_);
  if (batch.images.raw_data() != images_.raw_data()) backend.copy(batch.images, images_);
  if (batch.labels.raw_data() != labels_.raw_data()) backend.copy(batch.labels, labels_);
  if (!graph_) graph_ = backend.capture([this] { loss_ = body_(images_, labels_).detach(); });
  if (before_replay) before_replay();
  graph_->replay();
  return loss_;
}

}  // namespace nnlab
