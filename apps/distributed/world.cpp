#include "apps/distributed/world.h"

#include <cstdlib>
#include <iostream>

#ifdef NNLAB_WITH_MPI
#include <mpi.h>
#endif

namespace nnlab {

int launched_ranks() {
  // Open MPI sets OMPI_COMM_WORLD_SIZE; PMI_SIZE covers launchers speaking PMI (srun, hydra).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  return 1;
}

int launched_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(name)) return std::max(0, std::atoi(v));
  return 0;
}

#ifdef NNLAB_WITH_MPI

namespace {
// Turns an MPI error code into nnlab's one error type.
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  fail(call, " failed: ", std::string(text, static_cast<size_t>(len)),
       " (another rank probably stopped; mpirun's message names it)");
}
}  // namespace

World::World() {
  if (launched_ranks() <= 1) return;
  // FUNNELED: only the main thread calls MPI (OpenMP and the data loader's thread never do).
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  mpi_ = true;
  // Errors come back as codes (turned into nnlab::Error above) instead of killing the job
  // silently inside the library.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Hosts as MPI sees them (ranks that can share memory), not host names: the network
  // namespaces of scripts/mpi-netns.sh share one name but are two hosts to MPI.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
  double first_on_host = local_rank_ == 0 ? 1.0 : 0.0;
  sum(&first_on_host, 1);
  hosts_ = static_cast<int>(first_on_host);
}

std::string World::describe() const {
  if (!mpi_) return "one process (no MPI launcher)";
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<size_t>(len));
  v = v.substr(0, v.find(','));  // "Open MPI v4.1.4, package: ..." → "Open MPI v4.1.4"
  return v + ", " + std::to_string(size_) + " ranks on " + std::to_string(hosts_) + (hosts_ == 1 ? " host" : " hosts");
}

void World::sum(float* data, int64_t n) const {
  if (mpi_ && n > 0)
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
}

void World::sum(double* data, int64_t n) const {
  if (mpi_ && n > 0)
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
}

World::Pending World::start_sum(float* data, int64_t n) const {
  Pending p;
  if (!mpi_ || n == 0) return p;
  auto* request = new MPI_Request;
  const int code = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, request);
  if (code != MPI_SUCCESS) delete request;
  check_mpi(code, "MPI_Iallreduce");
  p.request = request;
  return p;
}

bool World::test(Pending& p) const {
  if (!p.request) return true;
  auto* request = static_cast<MPI_Request*>(p.request);
  int done = 0;
  check_mpi(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) {
    delete request;
    p.request = nullptr;
  }
  return done != 0;
}

void World::wait(Pending& p) const {
  if (!p.request) return;
  auto* request = static_cast<MPI_Request*>(p.request);
  p.request = nullptr;
  const int code = MPI_Wait(request, MPI_STATUS_IGNORE);
  delete request;
  check_mpi(code, "MPI_Wait");
}

void World::broadcast(float* data, int64_t n) const {
  if (mpi_ && n > 0) check_mpi(MPI_Bcast(data, static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

void World::broadcast_bytes(void* data, int64_t n) const {
  if (mpi_ && n > 0) check_mpi(MPI_Bcast(data, static_cast<int>(n), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

std::vector<std::string> World::gather_all(const std::string& text) const {
  if (!mpi_) return {text};
  // Lengths first, then the texts side by side (MPI_Allgatherv).
  int len = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
  check_mpi(MPI_Allgather(&len, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  int total = 0;
  for (int r = 0; r < size_; ++r) offsets[size_t(r)] = total, total += lengths[size_t(r)];
  std::string all(static_cast<size_t>(total), '\0');
  check_mpi(MPI_Allgatherv(text.data(), len, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                           MPI_COMM_WORLD),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(lengths[size_t(r)])));
  return out;
}

void World::finish() {
  if (!mpi_) return;
  mpi_ = false;
  MPI_Finalize();
}

void World::abort_job(int code) const {
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // built without MPI: a world of one process

World::World() {
  NNLAB_CHECK(launched_ranks() <= 1, "this nnlab was built without MPI, but a launcher started it as one of ",
              launched_ranks(), " processes; install libopenmpi-dev and rebuild (scripts/setup.sh), or run one process");
}

std::string World::describe() const { return "one process (nnlab built without MPI)"; }
void World::sum(float*, int64_t) const {}
void World::sum(double*, int64_t) const {}
World::Pending World::start_sum(float*, int64_t) const { return {}; }
bool World::test(Pending&) const { return true; }
void World::wait(Pending&) const {}
void World::broadcast(float*, int64_t) const {}
void World::broadcast_bytes(void*, int64_t) const {}
std::vector<std::string> World::gather_all(const std::string& text) const { return {text}; }
void World::finish() {}
void World::abort_job(int code) const { std::_Exit(code); }

#endif

namespace {
World* g_world = nullptr;  // set once World::get() has made the world
}

void World::agree_on_error(const std::string& error) const {
  const std::vector<std::string> all = gather_all(error);  // one rank: {error}
  std::string first, numbered;
  bool alike = true;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) {
      alike = false;  // some rank passed: name the ones that failed
      continue;
    }
    if (first.empty()) first = all[r];
    alike = alike && all[r] == first;
    numbered += (numbered.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " + all[r];
  }
  if (first.empty()) return;
  if (!distributed()) throw Error(first);
  throw CollectiveError(alike ? first : numbered);
}

World& World::get() {
  static World world;
  g_world = &world;
  return world;
}

void end_ranks() {
  if (g_world) g_world->finish();
}

int exit_after_error(const std::exception& e) {
  const bool collective = dynamic_cast<const CollectiveError*>(&e) != nullptr;
  if (!g_world || !g_world->distributed()) {
    std::cerr << "nnlab: error: " << e.what() << std::endl;
    return 1;
  }
  if (collective) {
    if (g_world->is_root()) std::cerr << "nnlab: error: " << e.what() << std::endl;
    g_world->finish();
    return 1;
  }
  std::cerr << "nnlab: error: rank " << g_world->rank() << " of " << g_world->size() << ": " << e.what()
            << "\nnnlab: ending the whole job (MPI_Abort), since the other ranks would wait for this one forever"
            << std::endl;
  g_world->abort_job(1);
}

}  // namespace nnlab
