// The Trainer's measurements of data: the test (or validation) accuracy, and the per-channel
// statistics of --normalize dataset. The rest of Trainer: trainer.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "apps/distributed/world.h"
#include "apps/trainer.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace nnlab {

// Per-channel mean and standard deviation of a data set's images (for --normalize dataset),
// accumulated in double over all pixels.
Normalization channel_statistics(const Dataset& data) {
  const int64_t n = data.size(), c = data.channels(), plane = data.height() * data.width();
  std::vector<double> sum(static_cast<size_t>(c), 0.0), sum_sq(static_cast<size_t>(c), 0.0);
  std::vector<float> sample(static_cast<size_t>(c * plane));
  for (int64_t i = 0; i < n; ++i) {
    data.sample_as_float(i, sample.data());
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* p = sample.data() + ch * plane;
      for (int64_t j = 0; j < plane; ++j) {
        sum[ch] += p[j];
        sum_sq[ch] += static_cast<double>(p[j]) * p[j];
      }
    }
  }
  Normalization norm;
  for (int64_t ch = 0; ch < c; ++ch) {
    const double count = static_cast<double>(n * plane), mean = sum[ch] / count;
    const double var = std::max(0.0, sum_sq[ch] / count - mean * mean);
    norm.mean.push_back(static_cast<float>(mean));
    norm.std.push_back(static_cast<float>(std::sqrt(var) > 1e-12 ? std::sqrt(var) : 1.0));
  }
  return norm;
}

EvalResult Trainer::evaluate(const Dataset& data) {
  NoGradGuard no_grad;
  model_->eval();
  Tensor correct = Tensor::zeros({}, DType::Int32, device_);
  const int64_t n = data.size();
  // In order, the training normalisation, no augmentation.
  DataLoaderOptions opts;
  opts.batch_size = 1000;
  opts.shuffle = false;
  opts.device = device_;
  opts.normalize = normalization_;
  // Distributed: every rank evaluates its slice of each batch with rank 0's BatchNorm
  // statistics, and the correct counts are summed.
  if (parallel_) parallel_->broadcast_buffers(*model_);
  opts.part = World::get().rank();
  opts.parts = World::get().size();
  DataLoader loader(data, opts);
  loader.start_epoch(0);
  Batch batch;
  while (loader.next(batch))
    if (batch.images.dim(0) > 0) accumulate_correct(model_->forward(batch.images), batch.labels, correct);
  model_->train();
  EvalResult r;
  r.correct = static_cast<int64_t>(correct.item());
  if (parallel_) r.correct = parallel_->sum(r.correct);
  r.total = n;
  r.accuracy = n ? static_cast<double>(r.correct) / static_cast<double>(n) : 0.0;
  return r;
}

}  // namespace nnlab
