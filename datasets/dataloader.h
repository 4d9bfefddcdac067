// DataLoader: turns a Dataset into batches, one epoch at a time.
//
//   order        random_permutation(n, RandomStream{seed, Shuffle, epoch}), or 0..n-1
//   batch s      samples order[s·B .. min(n, (s+1)·B)), the last one possibly partial
//   augment      random crop with zero padding, then random horizontal flip; the draws for
//                the sample at epoch position p come from RandomStream{seed, Augment, epoch}
//   normalise    y = (x − mean[c]) / std[c], after augmentation (as torchvision's
//                RandomCrop → RandomHorizontalFlip → ToTensor → Normalize)
//
// Every draw is made on the host and keyed by (seed, epoch, position), never by thread or
// device, so the same seed gives the same batches with or without prefetching, on any device.
// With prefetch on, a background thread builds the batches ahead of the training loop; an
// error there is rethrown from next().
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "datasets/dataset.h"

namespace nnlab {

struct Normalization {
  std::vector<float> mean, std;  // per channel; empty = none; y = (x - mean[c]) / std[c]
};

struct Augmentation {
  int64_t crop_padding = 0;      // random crop of the original size from the image padded with zeros
  bool horizontal_flip = false;  // mirror left-right with probability 1/2
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  uint64_t seed = 0;
  Normalization normalize;
  Augmentation augment;
  bool prefetch = true;            // a background thread prepares the next batch
  Device device = Device::cpu();   // batches are delivered on this device (Tensor::to)
  // The whole data set kept on `device` (uploaded once, as stored: bytes stay bytes) with each
  // epoch's order and crops and flips (drawn on the host, uploaded once per epoch into the same
  // memory), every batch gathered, converted and normalised there by two kernels, a full batch's place in the epoch read
  // from a counter on the device: no host work and no host-to-device copy per step. Same
  // batches, bit for bit. Needs one part.
  bool resident = false;
  // Data parallelism: this process takes part `part` of `parts` of every batch of b samples,
  // the samples [⌊b·part/parts⌋, ⌊b·(part+1)/parts⌋) (docs/distributed.md).
  int part = 0, parts = 1;
};

struct Batch {
  Tensor images;     // float32 (b, c, h, w)
  Tensor labels;     // int32 (b)
  int64_t step = 0;  // index of the batch within its epoch
  int64_t whole = 0; // samples in the whole batch, all parts together (= images.dim(0) with one part)
  // The loader gathers every full batch into the same device memory (a resident data set): a
  // CUDA graph can read its inputs there, with no copy of its own.
  bool fixed_storage = false;
  // Set when the loader left a full batch's gather to the caller (set_deferred_gathers): call
  // it before images and labels are read. Its kernels read the batch's place in the epoch on
  // the device, so inside a CUDA graph's capture they are recorded once and each replay
  // gathers the batch of its own step.
  std::function<void()> gather;
};

class DataLoader {
 public:
  DataLoader(const Dataset& data, DataLoaderOptions options);
  ~DataLoader();  // stops and joins the prefetch thread
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins epoch `epoch` at batch `skip_steps` (to resume mid-epoch from a checkpoint).
  void start_epoch(int64_t epoch, int64_t skip_steps = 0);
  // options_.resident: uploads the data set onto the device now (else the first epoch does).
  void upload_now() {
    if (options_.resident && !resident_images_.defined()) upload_resident();
  }
  // The next batch of the epoch; false at its end. The last partial batch is delivered.
  bool next(Batch& out);
  int64_t steps_per_epoch() const;  // ceil(n / batch_size)
  // Prefetch on or off from the next start_epoch (the trainer decides per epoch whether a
  // core is free for the worker thread).
  void set_prefetch(bool on) { options_.prefetch = on; }
  // options_.resident: full batches come with their gather left to do (Batch::gather).
  void set_deferred_gathers(bool on) { defer_gathers_ = on; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  // on_threads: the samples are copied by the OpenMP pool (the training thread's own call,
  // between steps, when the pool is idle), not by the prefetch thread.
  Batch make_batch(int64_t step, bool on_threads) const;
  void copy_sample(int64_t position, int32_t src, float* dst) const;
  void worker(int64_t first_step);
  void stop_worker();
  struct AugmentDraw {
    int32_t dy = 0, dx = 0;
    bool flip = false;
  };
  AugmentDraw augment_draw(int64_t position) const;  // this epoch's crop and flip for a position
  bool augmenting() const { return options_.augment.crop_padding > 0 || options_.augment.horizontal_flip; }
  void upload_resident();                    // options_.resident: the data set onto the device
  Batch gather_batch(int64_t step);          // ... and batch `step` gathered there

  Dataset data_;
  DataLoaderOptions options_;
  int64_t epoch_ = -1;
  std::vector<int32_t> order_;
  int64_t next_step_ = 0;  // next batch to hand out (without prefetch)
  // options_.resident: images (n, c, h, w) as stored (uint8 or float32), labels (n) and the
  // epoch's order (n) int32, all on options_.device.
  Tensor resident_images_, resident_labels_, resident_order_;
  Tensor resident_shifts_;    // int32 (n, 3) {dy, dx, flip} per epoch position
  Tensor resident_mean_std_;  // float32 (2, c) {mean; std}; undefined without a normalisation
  Tensor full_images_, full_labels_;  // where every full batch is gathered (Batch::fixed_storage)
  // int32 on the device: the epoch's next full batch, read and advanced by the gather kernels'
  // launches (gather_rows_at), so the order and the crops keep their addresses across epochs.
  Tensor resident_position_;
  bool defer_gathers_ = false;

  // Prefetch state, guarded by mutex_: the worker fills ready_ (at most kDepth batches
  // ahead) and waits while it is full; next() takes from it.
  static constexpr size_t kDepth = 2;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  bool stop_ = false;
  bool worker_done_ = false;
  std::exception_ptr error_;
};

}  // namespace nnlab
