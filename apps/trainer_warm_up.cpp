// The Trainer's warm-up (Trainer::warm_up): the one-off work of a CUDA run done before the
// first epoch's clock starts, as PyTorch's benchmarks and airbench do theirs, and reported
// apart instead of inside the first epoch.
//
// What it takes away from the first epoch: the libraries' start-up (cuBLAS and cuDNN load
// their kernels at first use), cuDNN's timed algorithm search (cudnnFind*, once per layer
// shape and direction: it runs every candidate), the caching allocator's first cudaMalloc
// of each block size, and with --data-on-device the training set's upload. It runs forward and backward once on a batch of zeros of the run's
// shape, drops the gradients and puts BatchNorm's running statistics back: no weight, no
// statistic and no random draw of the run changes, so a run's losses are the same with it as
// without (tests/gpu/test_gpu_graphs.cpp compares them). Each Dropout layer's step count (its
// masks follow it) is put back as well.
#include <spdlog/spdlog.h>

#include <chrono>

#include "apps/trainer.h"
#include "autograd/ops.h"
#include "devices/registry.h"
#include "layers/dropout.h"

namespace nnlab {

double Trainer::warm_up() {
  if (!config_.warm_up || !device_.is_cuda() || parallel_ || numerics_ || train_.size() == 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  Backend& backend = backend_for(device_);
  const int64_t batch = std::min<int64_t>(config_.batch, train_.size());
  const Tensor images = Tensor::zeros({batch, train_.channels(), train_.height(), train_.width()}, DType::Float32,
                                      device_);
  const Tensor labels = Tensor::zeros({batch}, DType::Int32, device_);
  std::vector<std::pair<std::string, Tensor>> buffers = model_->named_buffers();
  std::vector<Tensor> saved;
  for (const auto& [name, buffer] : buffers) saved.push_back(buffer.clone());
  const std::vector<Dropout*> dropouts = dropout_layers(*model_);
  std::vector<uint64_t> dropout_steps;
  for (const Dropout* d : dropouts) dropout_steps.push_back(d->step());
  optimizer_->zero_grad();
  cross_entropy(model_->forward_for_loss(images), labels).backward();
  optimizer_->zero_grad();
  for (size_t i = 0; i < buffers.size(); ++i) backend.copy(saved[i], buffers[i].second);
  for (size_t i = 0; i < dropouts.size(); ++i) dropouts[i]->set_step(dropout_steps[i]);
  loader_->upload_now();  // --data-on-device: the set's upload is one-off work too
  backend.synchronize();
  // The first full batch may be captured at once: its algorithms are chosen.
  if (batch == config_.batch) eager_full_steps_ = 1;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("warm-up: {:.2f} s before the first epoch's clock (forward and backward once on a batch of zeros: "
               "library start-up, cuDNN's algorithm search{}; no weight changed)",
               seconds, loader_->options().resident ? ", the training set's upload" : "");
  return seconds;
}

}  // namespace nnlab
