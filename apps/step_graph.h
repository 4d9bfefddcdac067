// What keeps a GPU training step free of host work: the data set held on the device
// (--data-on-device) and the whole step as one CUDA graph (--cuda-graphs).
//
// --cuda-graphs: the training step recorded once as a CUDA graph (Backend::capture) and
// replayed for every full batch, one launch instead of one per kernel: the batch's gather
// (with the set on the device), zero_grad, forward, loss, backward, the finiteness check of
// the loss and the gradients, the optimizer's update and the epoch's loss sum. What changes
// from step to step reaches the graph through device memory, never a kernel argument (a
// replay repeats the recorded ones): the batch's place in the epoch and the step's number
// (counters the graph advances), each Dropout layer's step count, and the optimizer's numbers
// (learning rate, momentum or β1, Adam's bias corrections), uploaded as a table for a window
// of 256 steps and picked row by row inside the graph (Optimizer::stage_recorded_step).
//
// What stays outside the graph, and why: that upload (host numbers), a batch copied from the
// host into the graph's input buffers (without the set on the device), the short last batch
// of an epoch (another shape), and with --clip-grad-norm the check and the update (the norm is
// read by the host). The replay gives the bits eager mode gives: the same kernels in the same
// order on the same data and numbers (tests/gpu/test_gpu_graphs.cpp compares them step by
// step).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "apps/train_config.h"
#include "core/tensor.h"
#include "datasets/dataloader.h"
#include "devices/backend.h"
#include "layers/module.h"

namespace nnlab {

enum class CudaGraphs { Auto, On, Off };
CudaGraphs parse_cuda_graphs(const std::string& text);  // auto | on | off, else an Error naming the option

// Why this run's step cannot be a graph ("" when it can): not CUDA, --check-numerics (it reads
// every layer back), or several ranks (the gradient all-reduce sits inside the step). Dropout
// is no obstacle: its step count lives on the device (layers/dropout.h).
std::string graph_obstacle(const Device& device, bool check_numerics, bool distributed);

// --data-on-device: whether the training set lives on the GPU for the run (DataLoaderOptions::
// resident: uploaded once, batches gathered there), or, where the user asked for it and it
// cannot, an Error saying why (augmentation, several ranks, not CUDA).
bool use_data_on_device(const TrainConfig& config, const Device& device, const Dataset& train, int ranks);

class GraphedStep {
 public:
  // forward_backward: the step without the optimizer, reading the images and labels it is
  // given and returning the loss (after its backward ran).
  using Body = std::function<Tensor(const Tensor& images, const Tensor& labels)>;
  GraphedStep(const Device& device, Body body);

  // Whether `batch` can use the graph: the shape it was captured for (or the first shape seen).
  bool fits(const Batch& batch) const;
  bool captured() const { return graph_ != nullptr; }
  // Copies the batch into the graph's inputs and replays the graph, capturing it first when
  // it is not captured yet; before_replay runs on the host between the capture and each
  // replay (uploads for the step go there). Returns the step's loss, on the device (the next
  // replay overwrites it).
  Tensor run(const Batch& batch, const std::function<void()>& before_replay = {});
  size_t nodes() const { return graph_ ? graph_->nodes() : 0; }
  size_t pool_bytes() const { return graph_ ? graph_->pool_bytes() : 0; }

 private:
  Device device_;
  Body body_;
  Tensor images_, labels_, loss_;
  std::unique_ptr<StepGraph> graph_;
};

}  // namespace nnlab
