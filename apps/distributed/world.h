// The processes of a data-parallel run, on Open MPI (docs/distributed.md).
//
// `mpirun -np N nnlab train ...` starts N copies of the program; each is a *rank* 0..N−1 of
// MPI_COMM_WORLD. World is this process's view of them: its rank, their number, and the few
// collective operations training needs (a sum over all ranks, a broadcast from rank 0, an
// all-gather of short texts). A program started without mpirun is a world of one rank, where
// every collective is the identity, so the single-process path runs the same code.
//
// MPI is initialised only when a launcher started the process (Open MPI's environment says so),
// never for a plain `nnlab train`; a build without MPI refuses to run as one of several ranks.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"

namespace nnlab {

// An error every rank raised together (all saw the same fact, e.g. mismatched options): rank 0
// prints it, the others stay quiet, and all end normally, so the job prints one message.
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const std::string& message) : Error(message) {}
};

class World {
 public:
  // The world of this process; the first call initialises MPI when a launcher started us.
  static World& get();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  bool is_root() const { return rank_ == 0; }
  // This rank's number among the ranks on its host (0 .. ranks on the host − 1): with
  // --device cuda, the GPU it takes (apps/trainer.cpp), so ranks of one host use distinct GPUs.
  int local_rank() const { return local_rank_; }
  // "Open MPI v4.1.4, 2 ranks on 1 host" or "one process (no MPI launcher)".
  std::string describe() const;

  // In place: data[i] ← Σ over ranks of data[i]. Blocks until every rank contributed.
  void sum(float* data, int64_t n) const;
  void sum(double* data, int64_t n) const;
  // A reduction started now and finished by wait(); test() lets MPI move it along.
  struct Pending {
    void* request = nullptr;  // MPI_Request, owned by World
  };
  Pending start_sum(float* data, int64_t n) const;
  bool test(Pending& p) const;  // true once finished
  void wait(Pending& p) const;
  // data on every rank ← data on rank 0.
  void broadcast(float* data, int64_t n) const;
  void broadcast_bytes(void* data, int64_t n) const;  // NCCL's unique id
  // Every rank's text, in rank order, on every rank.
  std::vector<std::string> gather_all(const std::string& text) const;

  // Runs `check` (a validation of options, say) on every rank, then agrees on the outcome
  // before any rank goes on: if it threw nnlab::Error anywhere, every rank throws one
  // CollectiveError, so the job prints one message instead of one per rank. Ranks started
  // alike fail alike: the message is then the check's own; otherwise each failing rank's,
  // numbered. Every rank must call it at the same point, and `check` should only check:
  // whatever it sets up would stand on the ranks that passed while others failed.
  template <typename Check>
  void agree(Check check) const {
    std::string error;
    try {
      check();
    } catch (const Error& e) {  // a CollectiveError too: its rank alone raised it here
      error = e.what();
    }
    agree_on_error(error);
  }

  // Ends MPI normally (every rank must call it). Called at exit by main.
  void finish();
  // Ends the whole job now (MPI_Abort), after an error seen by this rank alone: the other
  // ranks may be waiting for it inside a collective and would never return.
  [[noreturn]] void abort_job(int code) const;

 private:
  World();
  // agree()'s second half: `error` is this rank's message, empty if its check passed.
  void agree_on_error(const std::string& error) const;
  int rank_ = 0, size_ = 1;
  int hosts_ = 1;
  int local_rank_ = 0;
  bool mpi_ = false;
};

// Did a launcher (mpirun) start this process as one of several ranks? From the environment,
// without initialising anything.
int launched_ranks();
// This process's rank as the launcher numbered it (0 without one), from the environment too.
int launched_rank();

// The end of `nnlab`'s main: ends MPI when it was started (every rank calls it together).
void end_ranks();
// After an error: prints "nnlab: error: ..." and returns the exit code 1. In a distributed
// run a CollectiveError is printed by rank 0 alone and MPI ends normally; any other error is
// this rank's alone, so it is printed with the rank's number and the whole job is ended
// (MPI_Abort) rather than left waiting for this rank in a collective.
int exit_after_error(const std::exception& e);

}  // namespace nnlab
