#include "datasets/dataloader.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/pixels.h"
#include "core/random.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

void check_options(const Dataset& data, const DataLoaderOptions& o) {
  NNLAB_CHECK(data.images.defined() && data.labels.defined(), "DataLoader: data set '", data.name, "' is empty");
  NNLAB_CHECK(data.images.ndim() == 4 && data.images.device().is_cpu() &&
                  (data.images.dtype() == DType::Float32 || data.images.dtype() == DType::UInt8),
              "DataLoader: images must be float32 or uint8 (n, c, h, w) on the CPU, got ", data.images.describe());
  NNLAB_CHECK(data.labels.ndim() == 1 && data.labels.dtype() == DType::Int32 && data.labels.device().is_cpu() &&
                  data.labels.dim(0) == data.images.dim(0),
              "DataLoader: labels must be int32 (n) on the CPU matching images ", data.images.describe(), ", got ",
              data.labels.describe());
  NNLAB_CHECK(data.size() > 0, "DataLoader: data set '", data.name, "' has no samples");
  NNLAB_CHECK(o.batch_size > 0, "DataLoader: batch size ", o.batch_size, " must be positive");
  NNLAB_CHECK(o.parts >= 1 && o.part >= 0 && o.part < o.parts, "DataLoader: part ", o.part, " of ", o.parts,
              " does not exist (parts are numbered 0..parts-1)");
  const auto c = static_cast<size_t>(data.channels());
  const Normalization& nz = o.normalize;
  NNLAB_CHECK((nz.mean.empty() && nz.std.empty()) || (nz.mean.size() == c && nz.std.size() == c),
              "DataLoader: normalisation needs one mean and one std per channel (", c, " channels), got ",
              nz.mean.size(), " means and ", nz.std.size(), " stds");
  for (float s : nz.std) NNLAB_CHECK(s > 0.0f, "DataLoader: normalisation std ", s, " must be positive");
  NNLAB_CHECK(!o.resident || (!o.device.is_cpu() && o.parts == 1),
              "DataLoader: a data set held on the device needs a device other than the CPU and one part");
  NNLAB_CHECK(o.augment.crop_padding >= 0, "DataLoader: crop padding ", o.augment.crop_padding,
              " must be zero or positive");
  // Wider padding lets a crop miss the image entirely: a batch of nothing but padding.
  NNLAB_CHECK(o.augment.crop_padding <= std::min(data.height(), data.width()),
              "--crop-padding ", o.augment.crop_padding, " is wider than the images (", data.height(), "×",
              data.width(), "): a crop could miss the image entirely; use at most ",
              std::min(data.height(), data.width()), " (4 is usual for 32×32)");
}

// x: (n, c, plane) in place   x = (x − mean[ch]) / std[ch]   (nothing without a normalisation)
void normalize(const Normalization& nz, int64_t n, int64_t c, int64_t plane, float* x) {
  if (nz.mean.empty()) return;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      float* p = x + (i * c + ch) * plane;
      const float mean = nz.mean[ch], std = nz.std[ch];
      for (int64_t k = 0; k < plane; ++k) p[k] = normalized(p[k], mean, std);
    }
}

}  // namespace

DataLoader::DataLoader(const Dataset& data, DataLoaderOptions options) : data_(data), options_(std::move(options)) {
  check_options(data_, options_);
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::steps_per_epoch() const { return (data_.size() + options_.batch_size - 1) / options_.batch_size; }

void DataLoader::start_epoch(int64_t epoch, int64_t skip_steps) {
  NNLAB_CHECK(epoch >= 0, "DataLoader::start_epoch: epoch ", epoch, " must be zero or positive");
  NNLAB_CHECK(skip_steps >= 0 && skip_steps <= steps_per_epoch(), "DataLoader::start_epoch: cannot skip ",
              skip_steps, " steps of an epoch of ", steps_per_epoch());
  stop_worker();
  epoch_ = epoch;
  if (options_.shuffle) {
    order_ = random_permutation(data_.size(), RandomStream{options_.seed, RandomPurpose::Shuffle,
                                                           static_cast<uint32_t>(epoch)});
  } else {
    order_.resize(static_cast<size_t>(data_.size()));
    std::iota(order_.begin(), order_.end(), 0);
  }
  next_step_ = skip_steps;
  if (options_.resident) {
    if (!resident_images_.defined()) upload_resident();
    // Into the same device memory every epoch: a CUDA graph recorded the gathers' addresses.
    Backend& backend = backend_for(options_.device);
    if (!resident_order_.defined()) resident_order_ = Tensor::empty({data_.size()}, DType::Int32, options_.device);
    backend.copy_from_host(resident_order_, order_.data());
    if (augmenting()) {  // the epoch's crops and flips, drawn on the host as ever, uploaded once
      std::vector<int32_t> shifts(static_cast<size_t>(3 * data_.size()));
      for (int64_t p = 0; p < data_.size(); ++p) {
        const AugmentDraw d = augment_draw(p);
        shifts[3 * p] = d.dy, shifts[3 * p + 1] = d.dx, shifts[3 * p + 2] = d.flip ? 1 : 0;
      }
      if (!resident_shifts_.defined())
        resident_shifts_ = Tensor::empty({data_.size(), 3}, DType::Int32, options_.device);
      backend.copy_from_host(resident_shifts_, shifts.data());
    }
    if (!resident_position_.defined()) resident_position_ = Tensor::empty({}, DType::Int32, options_.device);
    backend.fill(resident_position_, static_cast<double>(skip_steps));
    return;
  }
  if (!options_.prefetch) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.clear();
    stop_ = false;
    worker_done_ = false;
    error_ = nullptr;
  }
  thread_ = std::thread(&DataLoader::worker, this, skip_steps);
}

bool DataLoader::next(Batch& out) {
  NNLAB_CHECK(epoch_ >= 0, "DataLoader::next: call start_epoch before asking for batches");
  if (options_.resident) {
    if (next_step_ >= steps_per_epoch()) return false;
    out = gather_batch(next_step_++);
    return true;
  }
  Batch batch;
  if (!options_.prefetch) {
    if (next_step_ >= steps_per_epoch()) return false;
    batch = make_batch(next_step_++, true);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || worker_done_; });
    if (ready_.empty()) {
      // Batches made before a failure were delivered first; the failure stays, so every
      // later call reports it too rather than ending the epoch quietly.
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    batch = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
  }
  if (options_.device != Device::cpu()) {
    batch.images = batch.images.to(options_.device);
    batch.labels = batch.labels.to(options_.device);
  }
  out = std::move(batch);
  return true;
}

void DataLoader::worker(int64_t first_step) {
  try {
    for (int64_t step = first_step; step < steps_per_epoch(); ++step) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < kDepth; });
        if (stop_) return;
      }
      Batch batch = make_batch(step, false);  // the work, done without holding the lock
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(batch));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    worker_done_ = true;
  }
  changed_.notify_all();
}

void DataLoader::stop_worker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.clear();
}

// images: (b, c, h, w) gathered from rows order[step·B ...] (this part's share of them); labels: (b)
Batch DataLoader::make_batch(int64_t step, bool on_threads) const {
  const int64_t start = step * options_.batch_size;
  const int64_t whole = std::min(data_.size(), start + options_.batch_size) - start;
  const int64_t first = start + whole * options_.part / options_.parts;
  const int64_t b = start + whole * (options_.part + 1) / options_.parts - first;
  const int64_t c = data_.channels(), plane = data_.height() * data_.width();
  Batch out;
  out.step = step;
  out.whole = whole;
  out.images = Tensor::empty({b, c, data_.height(), data_.width()});
  out.labels = Tensor::empty({b}, DType::Int32);
  float* x = out.images.data<float>();
  int32_t* y = out.labels.data<int32_t>();
  const int32_t* labels = data_.labels.data<int32_t>();
  // The samples lie at random places in a data set larger than the caches (47 MB for
  // Fashion-MNIST): asking for all of their cache lines first lets the loads below wait on
  // memory once, not once per sample; the copy had spent most of its time waiting.
  const auto prefetch = [&](int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) data_.prefetch_sample(order_[static_cast<size_t>(i)]);
  };
  const auto copy = [&](int64_t i) {
    const int32_t src = order_[static_cast<size_t>(first + i)];
    copy_sample(first + i, src, x + i * c * plane);
    y[i] = labels[src];
  };
  // Every sample's copy depends on its position alone, so the split changes no value. An
  // error may not leave a parallel region (the program would end without a word): the first
  // is kept and rethrown after it.
  if (on_threads) {
    // Each thread copies a contiguous share of the batch, then asks for the cache lines of the
    // same share of the next batch: a training step runs long enough (0.2 ms for the mlp) for
    // them to arrive, so the next copy finds its samples in the cache instead of waiting on
    // memory (the copy had been 5% of an mlp step).
    const int64_t next_start = std::min(data_.size(), start + options_.batch_size);
    const int64_t next_whole = std::min(data_.size(), next_start + options_.batch_size) - next_start;
    const int64_t next_first = next_start + next_whole * options_.part / options_.parts;
    const int64_t next_b = next_start + next_whole * (options_.part + 1) / options_.parts - next_first;
    std::exception_ptr error;
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t lo = b * t / threads, hi = b * (t + 1) / threads;
      prefetch(first + lo, first + hi);  // cached already, but for an epoch's first batch
      try {
        for (int64_t i = lo; i < hi; ++i) copy(i);
      } catch (...) {
#pragma omp critical(nnlab_batch_error)
        if (!error) error = std::current_exception();
      }
      prefetch(next_first + next_b * t / threads, next_first + next_b * (t + 1) / threads);
    }
    if (error) std::rethrow_exception(error);
  } else {
    prefetch(first, first + b);
    for (int64_t i = 0; i < b; ++i) copy(i);
  }
  normalize(options_.normalize, b, c, plane, x);
  return out;
}

// The data set as it is stored (uint8 pixels for IDX and CIFAR files: a quarter of the memory
// float32 would take), converted and normalised as each batch is gathered (gather_images).
void DataLoader::upload_resident() {
  resident_images_ = data_.images.to(options_.device);
  resident_labels_ = data_.labels.to(options_.device);
  const Normalization& nz = options_.normalize;
  if (!nz.mean.empty()) {
    std::vector<float> mean_std(nz.mean);
    mean_std.insert(mean_std.end(), nz.std.begin(), nz.std.end());
    resident_mean_std_ = Tensor::from_vector(mean_std, {2, data_.channels()}, options_.device);
  }
}

// images: (b, c, h, w) = resident_images_[order[step·B ...]]; labels: (b) likewise
// A full batch goes to the same memory every step: the step before has read it by then, as
// every kernel runs in order on the device's one stream.
Batch DataLoader::gather_batch(int64_t step) {
  const int64_t start = step * options_.batch_size;
  const int64_t b = std::min(data_.size(), start + options_.batch_size) - start;
  const Tensor index = resident_order_.rows(start, start + b);
  Batch out;
  out.step = step;
  out.whole = b;
  const Shape shape{b, data_.channels(), data_.height(), data_.width()};
  out.fixed_storage = b == options_.batch_size;
  if (out.fixed_storage && !full_images_.defined()) {
    full_images_ = Tensor::empty(shape, DType::Float32, options_.device);
    full_labels_ = Tensor::empty({b}, DType::Int32, options_.device);
  }
  out.images = out.fixed_storage ? full_images_ : Tensor::empty(shape, DType::Float32, options_.device);
  out.labels = out.fixed_storage ? full_labels_ : Tensor::empty({b}, DType::Int32, options_.device);
  Backend& backend = backend_for(options_.device);
  if (!out.fixed_storage) {  // the short last batch: its place as a host offset
    backend.gather_images(resident_images_, index, augmenting() ? resident_shifts_.rows(start, start + b) : Tensor(),
                          resident_mean_std_, out.images);
    backend.gather_rows(resident_labels_, index, out.labels);
    return out;
  }
  // A full batch: its place read from resident_position_ on the device, then advanced.
  Tensor images = out.images, labels = out.labels;
  auto gather = [this, images, labels]() mutable {
    Backend& on = backend_for(options_.device);
    on.gather_images_at(resident_images_, resident_order_, augmenting() ? resident_shifts_ : Tensor(),
                        resident_position_, resident_mean_std_, images);
    on.gather_rows_at(resident_labels_, resident_order_, resident_position_, labels);
    on.increment_counter(resident_position_);
  };
  if (defer_gathers_) out.gather = gather;
  else gather();
  return out;
}

// The crop offsets and the flip drawn for epoch position p: draws 3p, 3p + 1, 3p + 2 of the
// epoch's Augment stream (dy, dx uniform in [−pad, pad]; flip with probability 1/2).
DataLoader::AugmentDraw DataLoader::augment_draw(int64_t position) const {
  const int64_t pad = options_.augment.crop_padding;
  const RandomStream rs{options_.seed, RandomPurpose::Augment, static_cast<uint32_t>(epoch_)};
  const auto p = static_cast<uint64_t>(position);
  const auto span = static_cast<uint64_t>(2 * pad + 1);
  AugmentDraw d;
  d.dy = pad > 0 ? static_cast<int32_t>(rs.below(3 * p, span)) - static_cast<int32_t>(pad) : 0;
  d.dx = pad > 0 ? static_cast<int32_t>(rs.below(3 * p + 1, span)) - static_cast<int32_t>(pad) : 0;
  d.flip = options_.augment.horizontal_flip && rs.below(3 * p + 2, 2) == 1;
  return d;
}

// Copies sample `src` into dst (c, h, w), cropped and flipped as drawn for epoch position
// `position`. Crop: dst(y, x) = src(y + dy, x + dx), zero outside the image, with dy, dx
// uniform in [−pad, pad]; flip: x → w − 1 − x. Draws 6p..6p+5 of the stream belong to p.
void DataLoader::copy_sample(int64_t position, int32_t src, float* dst) const {
  const int64_t c = data_.channels(), h = data_.height(), w = data_.width();
  const int64_t pad = options_.augment.crop_padding;
  if (pad == 0 && !options_.augment.horizontal_flip) {
    data_.sample_as_float(src, dst);
    return;
  }
  // The sample as floats first (the data set may hold bytes), then cropped and flipped.
  thread_local std::vector<float> sample;
  sample.resize(static_cast<size_t>(c * h * w));
  data_.sample_as_float(src, sample.data());
  const float* s = sample.data();
  const AugmentDraw d = augment_draw(position);
  const int64_t dy = d.dy, dx = d.dx;
  const bool flip = d.flip;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y) {
      float* row = dst + (ch * h + y) * w;
      const int64_t sy = y + dy;
      if (sy < 0 || sy >= h) {
        std::fill(row, row + w, 0.0f);
        continue;
      }
      const float* srow = s + (ch * h + sy) * w;
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sx = (flip ? w - 1 - x : x) + dx;
        row[x] = (sx >= 0 && sx < w) ? srow[sx] : 0.0f;
      }
    }
}

}  // namespace nnlab
