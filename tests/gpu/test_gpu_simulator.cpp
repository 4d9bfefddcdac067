// The CUDA simulator's own semantics, with kernels written here: a block's threads meet at
// __syncthreads(), a barrier in divergent code is reported, atomics from many blocks add up,
// a bad launch configuration is refused, streams and events keep their order, and a warp's
// lanes meet at shuffles and __syncwarp(), with CUDA's rules on their masks reported. These run
// on the simulator build only (a GPU build compiles this file with the host compiler, which
// cannot define kernels); on a GPU the same semantics are the hardware's.
#include <catch2/catch.hpp>

#ifdef NNLAB_CUDA_SIMULATOR
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "cli_support.h"
#include "core/tensor.h"
#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_launch.h"

namespace {

constexpr int kBlock = 64;

// out: (blocks · kBlock)   out[b·kBlock + t] = slot(t) + slot((t + 1) % kBlock) with
// slot(t) = 1000·b + t: each thread reads its neighbour's shared slot, written before the
// barrier (the block number in it tells this block's value from a stale one).
__global__ void neighbour_kernel(int* out) {
  __shared__ int slot[kBlock];
  const int t = static_cast<int>(threadIdx.x);
  slot[t] = 1000 * static_cast<int>(blockIdx.x) + t;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = slot[t] + slot[(t + 1) % kBlock];
}

// Only the even threads reach the barrier: CUDA leaves that undefined; the simulator says so.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x % 2 == 0) __syncthreads();
  out[threadIdx.x] = 1;
}

// counter: one int   every thread of every block adds 1
__global__ void count_kernel(int* counter) { atomicAdd(counter, 1); }

template <typename T>
struct DeviceArray {
  explicit DeviceArray(size_t n) : n(n) { REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)) == cudaSuccess); }
  ~DeviceArray() { cudaFree(p); }
  std::vector<T> read() const {
    std::vector<T> host(n);
    REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
  void write(const std::vector<T>& host) {
    REQUIRE(host.size() == n);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  size_t n;
  T* p = nullptr;
};
using DeviceInts = DeviceArray<int>;

// x, out: (blocks · blockDim)   per warp w of the grid, from the values v of its lanes:
// down[w] = Σ v by a __shfl_down_sync tree (the total lands in lane 0), and every lane's
// butterfly total by __shfl_xor_sync, broadcast from lane 31 by __shfl_sync (all lanes agree).
template <typename T>
__global__ void warp_sum_kernel(const T* x, T* down, T* butterfly) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x), lane = i % 32;
  T v = x[i], all = x[i];
  for (unsigned offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  for (int mask = 16; mask > 0; mask /= 2) all += __shfl_xor_sync(0xffffffffu, all, mask);
  all = __shfl_sync(0xffffffffu, all, 31);
  if (lane == 0) down[i / 32] = v;
  butterfly[i] = all;
}

// x: (48)  out: (2, 2)   a block of 48 threads: warp 1 has 16 lanes. Its mask names only
// them. out[w, 0]: the sum with each shuffle's value used only where the source lane exists;
// out[w, 1]: the same tree using every value, so lane 0 of warp 1 adds lane 16's, past the block.
__global__ void partial_warp_kernel(const float* x, float* out) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32, lanes = min(32, 48 - t / 32 * 32);
  const unsigned mask = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  float guarded = x[t], unguarded = x[t];
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(mask, guarded, static_cast<unsigned>(offset));
    if (lane + offset < lanes) guarded += other;
    unguarded += __shfl_down_sync(mask, unguarded, static_cast<unsigned>(offset));
  }
  __syncwarp(mask);
  if (lane == 0) out[t / 32 * 2] = guarded, out[t / 32 * 2 + 1] = unguarded;
}

// Lane 5 skips the shuffle its full mask asks it to make and waits at the barrier instead.
__global__ void missing_lane_kernel(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 32 != 5) v += __shfl_down_sync(0xffffffffu, v, 1);
  __syncthreads();
  out[threadIdx.x] = v;
}

// Lanes 16-31 call with a mask naming lanes 0-15 only, not themselves.
__global__ void foreign_mask_kernel(int* out) {
  __syncwarp(0x0000ffffu);
  out[threadIdx.x] = 1;
}

// Lanes 20-31 exit first: CUDA excuses exited lanes from a full mask's __syncwarp, and a
// broadcast from lane 0 is defined for the lanes left.
__global__ void exited_lanes_kernel(int* out) {
  if (threadIdx.x >= 20) return;
  __syncwarp();
  out[threadIdx.x] = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) + 100, 0);
}

}  // namespace

TEST_CASE("gpu: on the simulator a block's threads meet at __syncthreads()", "[gpu][simulator]") {
  const int blocks = 5;
  DeviceInts out(blocks * kBlock);
  nnlab::sim::launch_kernel<int*>("neighbour_kernel", neighbour_kernel, blocks, kBlock, nullptr, out.p);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<int> got = out.read();
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < kBlock; ++t) REQUIRE(got[size_t(b * kBlock + t)] == 2000 * b + t + (t + 1) % kBlock);
}

TEST_CASE("gpu: on the simulator atomics from every block add up and bad launches are refused",
          "[gpu][simulator]") {
  DeviceInts counter(1);
  REQUIRE(cudaMemset(counter.p, 0, sizeof(int)) == cudaSuccess);
  nnlab::sim::launch_kernel<int*>("count_kernel", count_kernel, 300, 128, nullptr, counter.p);
  CHECK(counter.read()[0] == 300 * 128);
  nnlab::sim::launch_kernel<int*>("count_kernel", count_kernel, 1, 2048, nullptr, counter.p);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(nnlab::sim::last_diagnostic().find("count_kernel") != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);  // a launch error is not sticky
  CHECK(counter.read()[0] == 300 * 128);
}

TEST_CASE("gpu: on the simulator a stream's work runs in order and events mark it", "[gpu][simulator]") {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  DeviceInts a(1000), b(1000);
  std::vector<int> host(1000, 7), back(1000, 0);
  REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(a.p, 0, 1000 * sizeof(int), stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(a.p, host.data(), 1000 * sizeof(int), cudaMemcpyHostToDevice, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(b.p, a.p, 1000 * sizeof(int), cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
  REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
  CHECK(cudaEventQuery(stop) == cudaSuccess);
  float ms = -1.0f;
  REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 0.0f);
  CHECK(b.read() == host);  // the copy after the memset won, and the device copy saw it
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

// The divergent barrier makes the context unusable (a sticky error, as a GPU fault would):
// every later call returns it until the simulator's test hook clears it.
TEST_CASE("gpu: on the simulator a barrier in divergent code is the launch's error", "[gpu][simulator]") {
  DeviceInts out(kBlock);
  nnlab::sim::launch_kernel<int*>("divergent_barrier_kernel", divergent_barrier_kernel, 1, kBlock, nullptr, out.p);
  const cudaError_t err = cudaDeviceSynchronize();
  CHECK(err == cudaErrorLaunchFailure);
  CHECK_THAT(nnlab::sim::last_diagnostic(), Catch::Contains("divergent_barrier_kernel") &&
                                                Catch::Contains("__syncthreads() was reached by 32 of 64 threads"));
  CHECK(cudaMemset(out.p, 0, sizeof(int)) == cudaErrorLaunchFailure);  // sticky
  // The caching allocator's next cudaMalloc (200 MB: no cached block fits) fails too, and is
  // reported as the fault it is, not as "out of memory, try a smaller --batch".
  CHECK_THROWS_WITH(nnlab::Tensor::empty({50000017}, nnlab::DType::Float32, nnlab::Device::cuda(0)),
                    Catch::Contains("unspecified launch failure") && Catch::Contains("an earlier kernel faulted") &&
                        !Catch::Contains("smaller --batch"));
  nnlab::sim::clear_sticky_error_for_tests();
  CHECK(cudaMemset(out.p, 0, sizeof(int)) == cudaSuccess);
}
TEST_CASE("gpu: the simulator's settings are checked and a bad one is one clear message", "[gpu][simulator][cli]") {
  for (const char* setting : {"NNLAB_SIM_MEMORY_MB=abc", "NNLAB_SIM_THREADS=0", "NNLAB_SIM_MEMORY_MB=-5",
                              "NNLAB_SIM_DEVICES=0", "NNLAB_SIM_DEVICES=two"}) {
    const nnlab_test::CliResult r = nnlab_test::run_shell(std::string(setting) + " " + NNLAB_CLI_PATH +
                                                          " train --device cuda --model mlp --max-steps 1");
    INFO(setting << ": " << r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("must be a positive whole number"));
  }
  const nnlab_test::CliResult small = nnlab_test::run_shell(std::string("NNLAB_SIM_MEMORY_MB=1 ") + NNLAB_CLI_PATH +
                                                            " train --device cuda --model cnn --max-steps 1");
  INFO(small.output);
  CHECK(small.exit_code != 0);
  CHECK_THAT(small.output, Catch::Contains("out of memory on cuda:0") && Catch::Contains("smaller --batch"));
}
template <typename T>
void check_warp_sums() {
  const int blocks = 3, threads = 64, n = blocks * threads;
  std::vector<T> host(n);
  for (int i = 0; i < n; ++i) host[size_t(i)] = static_cast<T>((i * 7919) % 61);  // sums exact in any order
  DeviceArray<T> x(n), down(n / 32), butterfly(n);
  x.write(host);
  nnlab::sim::launch_kernel<const T*, T*, T*>("warp_sum_kernel", warp_sum_kernel<T>, blocks, threads, nullptr, x.p,
                                             down.p, butterfly.p);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<T> got = down.read(), all = butterfly.read();
  for (int w = 0; w < n / 32; ++w) {
    T serial = 0;
    for (int lane = 0; lane < 32; ++lane) serial += host[size_t(w * 32 + lane)];
    REQUIRE(got[size_t(w)] == serial);
    for (int lane = 0; lane < 32; ++lane) REQUIRE(all[size_t(w * 32 + lane)] == serial);
  }
}

TEST_CASE("gpu: on the simulator a warp's shuffles sum its lanes as a serial loop does", "[gpu][simulator][warp]") {
  check_warp_sums<float>();
  check_warp_sums<double>();
  check_warp_sums<int>();
  check_warp_sums<unsigned>();
}

TEST_CASE("gpu: on the simulator a partial last warp shuffles among its own lanes", "[gpu][simulator][warp]") {
  std::vector<float> host(48);
  for (int t = 0; t < 48; ++t) host[size_t(t)] = static_cast<float>(t + 1);
  DeviceArray<float> x(48), out(4);
  x.write(host);
  nnlab::sim::launch_kernel<const float*, float*>("partial_warp_kernel", partial_warp_kernel, 1, 48, nullptr, x.p,
                                                   out.p);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> got = out.read();
  CHECK(got[0] == 528.0f);  // 1 + … + 32
  CHECK(got[1] == 528.0f);  // a full warp: guarded or not, every source exists
  CHECK(got[2] == 648.0f);  // 33 + … + 48
  CHECK(std::isnan(got[3]));  // lane 16 of warp 1 lies past the block: undefined, NaN here

  DeviceInts early(32);
  nnlab::sim::launch_kernel<int*>("exited_lanes_kernel", exited_lanes_kernel, 1, 32, nullptr, early.p);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<int> broadcast = early.read();
  for (int t = 0; t < 20; ++t) CHECK(broadcast[size_t(t)] == 100);
}

// Both misuses leave the context faulted (as on a GPU); the test hook clears it after each.
TEST_CASE("gpu: on the simulator a lane missing from a warp call is the launch's error", "[gpu][simulator][warp]") {
  DeviceInts out(kBlock);
  nnlab::sim::launch_kernel<int*>("missing_lane_kernel", missing_lane_kernel, 1, kBlock, nullptr, out.p);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK_THAT(nnlab::sim::last_diagnostic(),
             Catch::Contains("missing_lane_kernel, block (0, 0, 0): warp 0: __shfl_down_sync with mask 0xffffffff "
                             "was reached by lanes 0-4, 6-31, but the mask also names lane 5 at __syncthreads()"));
  nnlab::sim::clear_sticky_error_for_tests();

  nnlab::sim::launch_kernel<int*>("foreign_mask_kernel", foreign_mask_kernel, 1, 32, nullptr, out.p);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK_THAT(nnlab::sim::last_diagnostic(),
             Catch::Contains("foreign_mask_kernel") && Catch::Contains("__syncwarp in thread 16 (warp 0, lane 16)") &&
                 Catch::Contains("does not name the calling lane"));
  nnlab::sim::clear_sticky_error_for_tests();
  CHECK(cudaMemset(out.p, 0, sizeof(int)) == cudaSuccess);
}
#endif
