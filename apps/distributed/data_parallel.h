// What `nnlab train` does differently when mpirun started it as one of several ranks
// (docs/distributed.md). The trainer holds one of these only in a distributed run, so a
// single process runs exactly the code it always ran.
//
//   start-up   every rank checks that all were started with the same options and built the
//              same initial weights, and refuses the job with one message if not
//   each step  this rank's slice of the global batch (DataLoaderOptions::part/parts), forward
//              and backward on it, then the gradients summed with weights b_r/b (GradientReducer)
//              so every rank holds the global batch's mean gradient and takes the same step
//   evaluate   BatchNorm's running statistics broadcast from rank 0, each rank evaluates its
//              slice of the test set, the correct counts are summed
//   output     rank 0 alone prints, writes run records and checkpoints
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/distributed/grad_reducer.h"
#include "apps/distributed/world.h"
#include "layers/sequential.h"

namespace nnlab {

class DataParallel {
 public:
  // params: the optimizer's. mode: --allreduce. backend: from --allreduce-backend
  // (decide_allreduce_backend, every rank alike).
  DataParallel(const World& world, std::vector<Tensor> params, AllReduceMode mode, AllReduceChoice backend);

  const World& world() const { return world_; }
  GradientReducer& reducer() { return reducer_; }

  // Refuses (CollectiveError on every rank, printed by rank 0 alone) a job whose ranks differ
  // in an option that changes what is computed, or in their initial weights.
  void check_same_start(const nlohmann::json& config, Sequential& model) const;

  // Around backward: `whole` samples in the global batch, this rank's `mine` of them, its loss.
  void begin_step(int64_t whole, int64_t mine, const Tensor& loss, bool stop);
  void finish_step() { reducer_.finish(); }

  // Rank 0's BatchNorm running statistics (and any other buffer) on every rank.
  void broadcast_buffers(Sequential& model) const;
  // Σ over ranks of a count.
  int64_t sum(int64_t count) const;
  // Is any rank asked to stop?
  bool any(bool flag) const;

  // The line the log shows at start: ranks, hosts, how a batch is split, the all-reduce.
  std::string describe(int64_t batch) const;

 private:
  const World& world_;
  GradientReducer reducer_;
};

// The seed of rank `rank`'s Dropout masks: the run's seed on rank 0 (its masks are those of
// the first samples of a one-process run), a different one on every other rank; with one
// seed, sample i of every rank's slice would be dropped alike.
uint64_t rank_dropout_seed(uint64_t seed, int rank);

// The device of this rank: under mpirun, `--device cuda` (or auto choosing CUDA) gives the
// ranks of one host distinct GPUs, the host's rank l taking cuda:(l mod the GPUs it has), so
// that each rank can have a GPU of its own (which NCCL needs); `--device cuda:N` is taken as
// asked, on every rank. `resolved` is what `asked` resolved to.
Device rank_device(Device resolved, const std::string& asked, const World& world);

// An options key that may differ between ranks: where output goes and how each rank runs
// (rank 0 alone writes; hosts may have different core counts).
bool may_differ_between_ranks(const std::string& key);

}  // namespace nnlab
