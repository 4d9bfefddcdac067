// NCCL on the CUDA simulator: the all-reduce of nnlab's data-parallel training across the
// simulated devices of all ranks on this machine, whether the ranks are processes (mpirun) or
// threads of one process (the tests).
//
// A communicator is a POSIX shared-memory segment named by the unique id: a slot per rank
// (joined, its process, its device's UUID, how many barriers it has reached, which collective
// it is in) and a staging area with a chunk per rank. An all-reduce runs on the caller's
// stream, in stream order, as NCCL's kernel does; in chunks of the staging area, each rank
//   1. copies its chunk of the send buffer into its part of the staging area,
//   2. waits at a barrier until every rank has (and checks they all run the same collective),
//   3. adds the ranks' chunks in rank order, 0 first, into its receive buffer,
//   4. waits at a second barrier until every rank has read them, so the area may be reused.
// Every rank adds the same numbers in the same order, so all ranks get the same bits (NCCL
// promises the same result on every rank too, in an order of its own).
//
// Where NCCL would hang (a rank that never calls the collective, or calls another one), the
// simulator waits NNLAB_SIM_NCCL_TIMEOUT seconds (default 300), then fails the collective
// naming the ranks that did not come and where they are; a rank whose process has exited is
// reported at once. The failure is a sticky error of the simulated device, which the next
// CUDA call returns with the message, as a failed kernel's would be.
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_runtime_state.h"

namespace nnlab::sim {
namespace {

constexpr int kMaxRanks = 64;
constexpr size_t kStagingBytes = size_t(16) << 20;  // shared by all ranks; tmpfs pages appear when touched
constexpr char kIdMagic[] = "nnlab-sim-nccl ";

// One rank's corner of the segment. Zero bytes (a fresh segment) are a valid state.
struct RankSlot {
  std::atomic<int32_t> claimed;     // set once by the rank (a second claim is an error)
  std::atomic<int32_t> joined;      // set after pid and uuid are written
  std::atomic<int32_t> pid;         // to tell a rank that exited from a slow one
  char uuid[16];                    // its device's UUID: two ranks on one device are refused
  std::atomic<uint64_t> arrivals;   // barriers it has reached
  std::atomic<uint64_t> collective; // the collective it is in: 1, 2, ... in stream order
  std::atomic<uint64_t> count;      // that collective's element count
};

struct Segment {
  std::atomic<int32_t> nranks;    // set by the first rank to join
  std::atomic<int32_t> attached;  // ranks attached; the last one removes the name
  RankSlot slots[kMaxRanks];
};
constexpr size_t kSegmentBytes = sizeof(Segment) + kStagingBytes;

thread_local std::string t_last_nccl_error;  // for ncclGetLastError(nullptr): a failed init
thread_local int t_group_depth = 0;

// Read when a communicator is made (on the caller's thread, so a bad value is the caller's
// error, not a stream thread's), so a test can shorten it for one communicator.
double timeout_seconds() {
  const long long s = env_count("NNLAB_SIM_NCCL_TIMEOUT");
  return s > 0 ? static_cast<double>(s) : 300.0;
}

bool process_exited(int32_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace
}  // namespace nnlab::sim

struct ncclComm {
  int nranks = 0, rank = 0, device = 0;
  double timeout_seconds = 0;  // NNLAB_SIM_NCCL_TIMEOUT when it was made
  nnlab::sim::Segment* segment = nullptr;
  float* staging = nullptr;
  size_t chunk_floats = 0;  // each rank's part of the staging area
  // Touched on the stream's thread only, in stream order:
  uint64_t executed = 0;  // collectives run
  uint64_t barriers = 0;  // barriers passed
  bool broken = false;    // after a failed collective nothing more runs
  std::mutex error_mutex;
  ncclResult_t async_error = ncclSuccess;
  std::string last_error;
};

namespace nnlab::sim {
namespace {

ncclResult_t fail_init(ncclResult_t result, std::string text) {
  t_last_nccl_error = std::move(text);
  return result;
}

// A collective failed on the stream: the communicator keeps the error (ncclCommGetAsyncError,
// ncclGetLastError) and the device turns it into a sticky error, as a faulting kernel does.
void fail_async(ncclComm* c, ncclResult_t result, const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(c->error_mutex);
    c->async_error = result;
    c->last_error = text;
  }
  c->broken = true;
  raise_sticky_error(cudaErrorLaunchFailure, "the simulator's NCCL on cuda:" + std::to_string(c->device) + ", rank " +
                                                 std::to_string(c->rank) + " of " + std::to_string(c->nranks) + ": " +
                                                 text);
}

// Waits until `ready` holds for every rank; "" then, else why not: a rank whose process has
// exited, or the ranks still missing after the timeout and where each is.
std::string wait_for_ranks(const ncclComm* c, const std::function<bool(const RankSlot&)>& ready, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_check = start;
  for (int spin = 0;; ++spin) {
    std::string missing;
    for (int r = 0; r < c->nranks; ++r) {
      const RankSlot& slot = c->segment->slots[r];
      if (ready(slot)) continue;
      missing += (missing.empty() ? "rank " : ", rank ") + std::to_string(r) + " (at collective #" +
                 std::to_string(slot.collective.load(std::memory_order_relaxed)) + ")";
      if (Clock::now() >= next_check && process_exited(slot.pid.load(std::memory_order_relaxed)))
        return what + ": rank " + std::to_string(r) + " (process " + std::to_string(slot.pid.load()) +
               ") has exited";
    }
    if (missing.empty()) return "";
    const auto now = Clock::now();
    if (now >= next_check) next_check = now + std::chrono::milliseconds(200);
    if (std::chrono::duration<double>(now - start).count() > c->timeout_seconds)
      return what + ": " + missing + " did not come within " + std::to_string(static_cast<int>(c->timeout_seconds)) +
             " s (NNLAB_SIM_NCCL_TIMEOUT); NCCL would wait for ever: every rank must make the same collectives in "
             "the same order";
    // Yield first (the other rank is often a moment behind), then sleep: ranks share few cores.
    if (spin < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (spin - 63))));
  }
}

std::string barrier(ncclComm* c, const std::string& what) {
  const uint64_t target = ++c->barriers;
  c->segment->slots[c->rank].arrivals.store(target, std::memory_order_release);
  return wait_for_ranks(
      c, [target](const RankSlot& s) { return s.arrivals.load(std::memory_order_acquire) >= target; }, what);
}

// "rank 0: #3 of 1000 floats, rank 1: #3 of 999 floats" when the ranks disagree, else "".
std::string mismatch(const ncclComm* c, uint64_t number, uint64_t count) {
  bool same = true;
  std::string all;
  for (int r = 0; r < c->nranks; ++r) {
    const RankSlot& s = c->segment->slots[r];
    const uint64_t n = s.collective.load(std::memory_order_relaxed), k = s.count.load(std::memory_order_relaxed);
    same = same && n == number && k == count;
    all += (r ? ", rank " : "rank ") + std::to_string(r) + ": #" + std::to_string(n) + " of " + std::to_string(k) +
           " floats";
  }
  return same ? "" : all;
}

// send, recv: (count) float32 on c's device (recv may be send)   recv ← Σ over ranks of send
void run_all_reduce(ncclComm* c, const float* send, float* recv, size_t count) {
  if (c->broken) return;
  const uint64_t number = ++c->executed;
  RankSlot& me = c->segment->slots[c->rank];
  me.collective.store(number, std::memory_order_relaxed);
  me.count.store(count, std::memory_order_relaxed);
  const std::string what = "ncclAllReduce #" + std::to_string(number) + " of " + std::to_string(count) + " floats";
  float* mine = c->staging + static_cast<size_t>(c->rank) * c->chunk_floats;
  for (size_t offset = 0; offset < count || (offset == 0 && count == 0); offset += c->chunk_floats) {
    const size_t n = std::min(c->chunk_floats, count - offset);
    std::memcpy(mine, send + offset, n * sizeof(float));
    if (std::string e = barrier(c, what); !e.empty()) return fail_async(c, ncclRemoteError, e);
    if (offset == 0)
      if (std::string m = mismatch(c, number, count); !m.empty())
        return fail_async(c, ncclInvalidUsage, what + " meets another collective: " + m +
                                                   " (every rank must make the same collectives in the same order)");
    float* out = recv + offset;
    std::memcpy(out, c->staging, n * sizeof(float));
    for (int r = 1; r < c->nranks; ++r) {
      const float* theirs = c->staging + static_cast<size_t>(r) * c->chunk_floats;
      for (size_t i = 0; i < n; ++i) out[i] += theirs[i];
    }
    if (std::string e = barrier(c, what); !e.empty()) return fail_async(c, ncclRemoteError, e);
    if (count == 0) break;
  }
}

// Whether [p, p + bytes) is device memory of `device`; otherwise the diagnostic.
std::string not_device_memory(const char* what, const void* p, size_t bytes, int device) {
  Region r;
  const bool found = find_region(p, &r);
  if (found && r.kind == MemoryKind::Device && r.device == device &&
      static_cast<size_t>(static_cast<const char*>(p) - r.base) + bytes <= r.bytes)
    return "";
  char where[32];
  std::snprintf(where, sizeof where, "%p", p);
  return std::string("ncclAllReduce: ") + what + " (" + where + ", " + std::to_string(bytes) +
         " bytes) is not device memory of the communicator's cuda:" + std::to_string(device) +
         (found && r.kind == MemoryKind::Device ? " (it is on cuda:" + std::to_string(r.device) + ")" : "");
}

}  // namespace
}  // namespace nnlab::sim

using nnlab::sim::fail_init;

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail_init(ncclInvalidArgument, "ncclGetVersion: null argument");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

// The id names the shared-memory segment: this process, a counter and 64 random bits.
ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (!unique_id) return fail_init(ncclInvalidArgument, "ncclGetUniqueId: null argument");
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  const unsigned long long salt = (static_cast<unsigned long long>(random()) << 32) ^ random();
  std::memset(unique_id->internal, 0, sizeof unique_id->internal);
  std::snprintf(unique_id->internal, sizeof unique_id->internal, "%s/nnlab-nccl-%d-%u-%016llx", nnlab::sim::kIdMagic,
                static_cast<int>(getpid()), counter++, salt);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  using namespace nnlab::sim;
  if (!comm) return fail_init(ncclInvalidArgument, "ncclCommInitRank: null argument");
  *comm = nullptr;
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    return fail_init(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                                              std::to_string(nranks) + " (the simulator takes 1 to " +
                                              std::to_string(kMaxRanks) + " ranks, each 0 ≤ rank < nranks)");
  comm_id.internal[NCCL_UNIQUE_ID_BYTES - 1] = '\0';
  if (std::strncmp(comm_id.internal, kIdMagic, sizeof kIdMagic - 1) != 0)
    return fail_init(ncclInvalidArgument, "ncclCommInitRank: the unique id does not come from the simulator's "
                                          "ncclGetUniqueId");
  const std::string name = comm_id.internal + sizeof kIdMagic - 1;
  const double timeout = timeout_seconds();  // a bad NNLAB_SIM_NCCL_TIMEOUT throws here, before anything is made
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return fail_init(ncclSystemError, "shm_open(" + name + "): " + std::strerror(errno));
  const bool sized = ftruncate(fd, static_cast<off_t>(kSegmentBytes)) == 0;  // the same size from every rank
  void* mapped = sized ? mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int saved_errno = errno;
  close(fd);
  if (mapped == MAP_FAILED) {
    shm_unlink(name.c_str());
    return fail_init(ncclSystemError, "mapping the shared memory " + name + " (" + std::to_string(kSegmentBytes >> 20) +
                                          " MiB, /dev/shm): " + std::strerror(saved_errno));
  }
  auto* c = new ncclComm;
  c->nranks = nranks;
  c->rank = rank;
  c->timeout_seconds = timeout;
  c->device = current_device();
  c->segment = static_cast<Segment*>(mapped);
  c->staging = reinterpret_cast<float*>(static_cast<char*>(mapped) + sizeof(Segment));
  c->chunk_floats = kStagingBytes / sizeof(float) / static_cast<size_t>(nranks);
  auto give_up = [&](ncclResult_t result, std::string text) {
    munmap(mapped, kSegmentBytes);
    delete c;
    return fail_init(result, std::move(text));
  };
  int32_t expected = 0;
  if (!c->segment->nranks.compare_exchange_strong(expected, nranks) && expected != nranks)
    return give_up(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " was told of " +
                                         std::to_string(nranks) + " ranks, an earlier rank of " + std::to_string(expected));
  RankSlot& me = c->segment->slots[rank];
  int32_t unclaimed = 0;
  if (!me.claimed.compare_exchange_strong(unclaimed, 1))
    return give_up(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " joined twice");
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, c->device);
  std::memcpy(me.uuid, prop.uuid.bytes, sizeof me.uuid);
  me.pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  me.joined.store(1, std::memory_order_release);
  const std::string waited = wait_for_ranks(
      c, [](const RankSlot& s) { return s.joined.load(std::memory_order_acquire) == 1; }, "ncclCommInitRank");
  // Every rank has the segment mapped (or gave up): its name is no longer needed.
  if (c->segment->attached.fetch_add(1) + 1 == nranks || !waited.empty()) shm_unlink(name.c_str());
  if (!waited.empty()) return give_up(ncclRemoteError, waited);
  // NCCL refuses two ranks on one GPU; so does the simulator, with NCCL's words.
  for (int a = 0; a < nranks; ++a)
    for (int b = a + 1; b < nranks; ++b)
      if (std::memcmp(c->segment->slots[a].uuid, c->segment->slots[b].uuid, sizeof me.uuid) == 0)
        return give_up(ncclInvalidUsage, "Duplicate GPU detected : rank " + std::to_string(b) + " and rank " +
                                             std::to_string(a) + " both on CUDA device " +
                                             std::string(c->segment->slots[a].uuid, sizeof me.uuid));
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  munmap(comm->segment, nnlab::sim::kSegmentBytes);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !count) return fail_init(ncclInvalidArgument, "ncclCommCount: null argument");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return fail_init(ncclInvalidArgument, "ncclCommUserRank: null argument");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm || !async_error) return fail_init(ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  std::lock_guard<std::mutex> lock(comm->error_mutex);
  *async_error = comm->async_error;
  return ncclSuccess;
}

// Queued on `stream` like NCCL's kernel: it runs after the work queued there before it.
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  using namespace nnlab::sim;
  if (!comm) return fail_init(ncclInvalidArgument, "ncclAllReduce: the communicator is null");
  auto fail = [&](ncclResult_t result, std::string text) {
    std::lock_guard<std::mutex> lock(comm->error_mutex);
    comm->last_error = std::move(text);
    return result;
  };
  if (datatype != ncclFloat32 || op != ncclSum)
    return fail(ncclInvalidArgument, "ncclAllReduce: the simulator's NCCL sums float32 (datatype " +
                                         std::to_string(ncclFloat32) + ", op ncclSum) only; got datatype " +
                                         std::to_string(datatype) + ", op " + std::to_string(op));
  if (!is_stream(stream)) return fail(ncclInvalidArgument, "ncclAllReduce: not a stream");
  if (stream_device(stream) != comm->device)
    return fail(ncclInvalidUsage, "ncclAllReduce: a stream of cuda:" + std::to_string(stream_device(stream)) +
                                      " for a communicator on cuda:" + std::to_string(comm->device));
  const size_t bytes = count * sizeof(float);
  std::string wrong = count ? not_device_memory("the send buffer", sendbuff, bytes, comm->device) : "";
  if (wrong.empty() && count) wrong = not_device_memory("the receive buffer", recvbuff, bytes, comm->device);
  if (!wrong.empty()) return fail(ncclInvalidArgument, wrong);
  const auto* send = static_cast<const float*>(sendbuff);
  auto* recv = static_cast<float*>(recvbuff);
  enqueue(stream, "nccl", "ncclAllReduce", [comm, send, recv, count] { run_all_reduce(comm, send, recv, count); });
  return ncclSuccess;
}

// The collectives run as they are issued, so a group only has to be well nested.
ncclResult_t ncclGroupStart() {
  ++nnlab::sim::t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (nnlab::sim::t_group_depth == 0) return fail_init(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  --nnlab::sim::t_group_depth;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclNumResults: break;
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (!comm) return nnlab::sim::t_last_nccl_error.c_str();
  std::lock_guard<std::mutex> lock(comm->error_mutex);
  return comm->last_error.c_str();
}
