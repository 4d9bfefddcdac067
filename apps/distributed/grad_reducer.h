// Averaging the gradients of a data-parallel step over all ranks (docs/distributed.md).
//
// Each rank r computed, on its b_r samples of a global batch of b, the mean-loss gradient
//   g_r = (1/b_r) Σ_{i in r} ∇ℓ_i.
// The gradient of the global batch's mean loss is the mean over all b samples,
//   g = (1/b) Σ_i ∇ℓ_i = Σ_r (b_r / b) · g_r,
// so every rank scales its gradient by its share b_r/b and the ranks sum (all-reduce). The
// result is exact even when b does not divide evenly by the number of ranks, and a rank with no
// sample in the batch (b_r = 0) adds zeros.
//
// The gradients are packed into flat host buffers, "buckets", in the order backward produces
// them (last layer first). One MPI call per bucket costs one latency instead of one per tensor.
// Two ways to run them:
//   step     one bucket with every gradient, reduced after backward
//   overlap  buckets of about bucket_bytes, each reduced (MPI_Iallreduce) as soon as backward
//            has produced all of its gradients, while backward goes on with earlier layers
// Where the buckets live and who sums them (apps/distributed/allreduce_backend.h):
//   mpi   host buffers summed by MPI; CUDA gradients are staged through them (copied down,
//         reduced, copied back)
//   nccl  one CUDA buffer per bucket: backward's gradients are scaled into it by a kernel
//         (axpby), ncclAllReduce sums it on the communicator's own stream (ordered by events,
//         so in overlap mode it runs beside the rest of backward), and copies on the backend's
//         stream put the sums back once it has waited for them, so CUDA gradients never leave
//         the GPU and no step waits for them on the host. The loss and stop extras, host
//         numbers, go through one small MPI sum.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/distributed/allreduce_backend.h"
#include "apps/distributed/world.h"
#include "autograd/node.h"
#include "core/tensor.h"
#include "devices/nccl_comm.h"

namespace nnlab {

// The samples [begin, end) of a batch of b that rank `rank` of `ranks` takes:
// [⌊b·rank/ranks⌋, ⌊b·(rank+1)/ranks⌋). Sizes differ by at most one; they sum to b.
struct BatchSlice {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
BatchSlice batch_slice(int64_t b, int rank, int ranks);

enum class AllReduceMode { step, overlap };
AllReduceMode parse_allreduce_mode(const std::string& text);

class GradientReducer {
 public:
  // params: the optimizer's, in its order. Every rank must pass the same shapes. With the
  // nccl backend every rank joins one NCCL communicator here (a collective).
  GradientReducer(const World& world, std::vector<Tensor> params, AllReduceMode mode, int64_t bucket_bytes,
                  AllReduceChoice backend);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before backward. share = b_r / b; loss = this rank's mean loss (undefined when b_r = 0);
  // stop = this rank was asked to stop (SIGINT/SIGTERM), so all ranks stop after the same step.
  // In overlap mode it installs the engine's backward hook until finish().
  void begin(double share, const Tensor& loss, bool stop);
  // After backward: every parameter's .grad holds the gradient of the global batch's mean loss.
  void finish();

  double global_loss() const { return global_loss_; }  // Σ_r (b_r/b) · loss_r
  bool stop_requested() const { return stop_; }        // some rank was asked to stop
  double last_seconds() const { return last_seconds_; }  // time the step waited on the reduction
  // nccl: the device time of the sums since the last call (CUDA events on the communicator's
  // stream; waits for them on the host: call it where the epoch is read anyway). -1 with mpi.
  double take_device_seconds();
  int64_t gradient_bytes() const { return gradient_floats_ * int64_t(sizeof(float)); }
  // What each rank sends and receives in a ring all-reduce: 2·(N−1)/N of the gradient bytes.
  double ring_bytes_per_rank() const;
  size_t bucket_count() const { return buckets_.size(); }
  // "0.90 MiB of gradients in 1 bucket, reduced once after backward; MPI on host memory"
  std::string describe() const;
  AllReduceBackend backend() const { return backend_.backend; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_, in backward order
    std::vector<int64_t> offsets;  // of each param's gradient in data (or device_data)
    int64_t floats = 0;          // the gradients' floats, without the extras
    std::vector<float> data;     // mpi: the packed, scaled gradients (+ the extras in the last bucket)
    Tensor device_data;          // nccl: the packed, scaled gradients on the GPU (floats)
    size_t waiting = 0;          // gradients of this step not produced yet
    World::Pending pending;
    bool launched = false;
  };
  void on_backward_node(const Node& node);
  void count_uses(const Tensor& loss);
  void mark_ready(size_t param);
  void launch_ready_buckets();
  void launch(Bucket& bucket);
  void launch_on_device(Bucket& bucket);
  void unpack(const Bucket& bucket);
  void unpack_on_device(const Bucket& bucket);
  Tensor slot(const Bucket& bucket, size_t j) const;  // the bucket's j-th gradient, a view of device_data

  const World& world_;
  std::vector<Tensor> params_;
  AllReduceMode mode_;
  AllReduceChoice backend_;
  std::unique_ptr<NcclCommunicator> nccl_;  // the nccl backend's communicator
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // param -> its bucket
  std::unordered_map<const void*, size_t> index_of_;  // a parameter's TensorImpl -> its index
  std::vector<int> uses_left_;     // overlap: graph nodes still to pass each param a gradient
  std::vector<size_t> arriving_;   // params whose gradient the engine adds right after the hook
  size_t next_launch_ = 0;         // buckets are launched in index order, the same on every rank
  int64_t gradient_floats_ = 0;
  double share_ = 0, local_loss_ = 0, global_loss_ = 0;
  bool stop_ = false;
  double last_seconds_ = 0;
};

}  // namespace nnlab
