// Tensors, views and the caching allocator.
#include <catch2/catch.hpp>
#include <omp.h>

#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"

using namespace nnlab;

TEST_CASE("tensors know their shape, dtype and device", "[tensor]") {
  Tensor t = Tensor::zeros({2, 3, 4});
  CHECK(t.numel() == 24);
  CHECK(t.ndim() == 3);
  CHECK(t.dim(-1) == 4);
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.device() == Device::cpu());
  CHECK(t.describe() == "float32[2, 3, 4] on cpu");
  CHECK_THROWS_WITH(t.dim(3), Catch::Contains("dimension 3 out of range"));
  CHECK_THROWS_WITH(Tensor::empty({2, -1}), Catch::Contains("negative extent"));
}

TEST_CASE("from_vector, to_vector, fill, cast and clone", "[tensor]") {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor d = t.to(DType::Float64);
  CHECK(d.dtype() == DType::Float64);
  CHECK(d.to_vector<double>()[5] == 6.0);
  Tensor c = t.clone();
  c.fill_(7);
  CHECK(t.to_vector<float>()[0] == 1.0f);
  CHECK(c.to_vector<float>()[0] == 7.0f);
  CHECK_THROWS_WITH(Tensor::from_vector<float>({1, 2}, {3}), Catch::Contains("do not fill shape [3]"));
  CHECK_THROWS_WITH(t.data<double>(), Catch::Contains("read as float64"));
  CHECK_THROWS_WITH(t.item(), Catch::Contains("one element"));
}

TEST_CASE("views share storage: view and rows", "[tensor]") {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  Tensor v = t.view({2, 4});
  CHECK(v.same_storage(t));
  Tensor r = t.rows(1, 3);
  CHECK(r.shape() == Shape{2, 2});
  CHECK(r.to_vector<float>() == std::vector<float>{2, 3, 4, 5});
  r.fill_(9);
  CHECK(t.to_vector<float>() == std::vector<float>{0, 1, 9, 9, 9, 9, 6, 7});
  CHECK_THROWS_WITH(t.view({3, 3}), Catch::Contains("element counts differ"));
  CHECK_THROWS_WITH(t.rows(3, 5), Catch::Contains("out of range"));
}

TEST_CASE("caching allocator reuses blocks and counts bytes", "[allocator]") {
  int raw_allocs = 0;
  CachingAllocator a(
      "test", [&](size_t n) { ++raw_allocs; return std::malloc(n); }, [](void* p) { std::free(p); });
  void* p = a.allocate(1000);
  CHECK(a.stats().current_bytes == CachingAllocator::round_size(1000));
  a.deallocate(p);
  CHECK(a.stats().current_bytes == 0);
  void* q = a.allocate(1000);
  CHECK(q == p);  // served from the cache
  CHECK(raw_allocs == 1);
  void* big = a.allocate(1 << 20);
  CHECK(a.stats().peak_bytes >= (1u << 20));
  a.deallocate(q);
  a.deallocate(big);
  a.empty_cache();
  CHECK(a.stats().cached_bytes == 0);
  CHECK(a.stats().underlying_frees == 2);
}

// A CUDA graph replays on the blocks its capture used: they stay the pool's until released.
TEST_CASE("caching allocator keeps a capture's blocks in the capture's pool", "[allocator]") {
  CachingAllocator a(
      "test", [](size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); });
  void* cached = a.allocate(1000);
  a.deallocate(cached);  // in the shared cache
  const int pool = a.begin_capture_pool();
  void* scratch = a.allocate(1000);  // the cached block, now the pool's
  CHECK(scratch == cached);
  void* kept = a.allocate(4000);  // stays live after the capture (a gradient)
  a.deallocate(scratch);           // freed inside the capture: back to the pool, not the cache
  a.end_capture_pool();
  CHECK(a.pool_bytes(pool) == CachingAllocator::round_size(1000) + CachingAllocator::round_size(4000));
  void* other = a.allocate(1000);
  CHECK(other != scratch);  // nobody else gets the pool's block
  a.deallocate(kept);       // a pool block freed later goes back to the pool too
  void* other_big = a.allocate(4000);
  CHECK(other_big != kept);
  a.release_pool(pool);     // the graph is gone: its blocks serve everyone again
  CHECK(a.pool_bytes(pool) == 0);
  void* reused = a.allocate(1000);
  CHECK(reused == scratch);
  for (void* p : {other, other_big, reused}) a.deallocate(p);
}

TEST_CASE("round_size keeps waste under 25%", "[allocator]") {
  for (size_t n : {1, 255, 256, 257, 1000, 4097, 100000, 3136 * 64 * 4}) {
    const size_t r = CachingAllocator::round_size(n);
    CHECK(r >= n);
    if (n > 256) CHECK(r <= n + n / 4 + 1);
  }
}

TEST_CASE("out of memory names the request and the bytes in use", "[allocator]") {
  CachingAllocator a(
      "testdev", [](size_t n) { return n > 4096 ? nullptr : std::malloc(n); }, [](void* p) { std::free(p); });
  void* p = a.allocate(2000);
  CHECK_THROWS_WITH(a.allocate(1 << 30), Catch::Contains("out of memory on testdev") &&
                                             Catch::Contains("asked for 1073741824 bytes") &&
                                             Catch::Contains("smaller --batch"));
  a.deallocate(p);
}

TEST_CASE("devices parse and an unusable CUDA device is refused clearly", "[device]") {
  CHECK(parse_device("cpu") == Device::cpu());
  CHECK(parse_device("cuda:1") == Device::cuda(1));
  CHECK_THROWS_WITH(parse_device("tpu"), Catch::Contains("unknown device 'tpu'"));
  std::string why;
  const Device d = resolve_device("auto", &why);
  CHECK(why.find("auto: chose") == 0);
  if (!cuda_status().usable) {
    CHECK(d == Device::cpu());
    CHECK_THROWS_WITH(resolve_device("cuda", nullptr), Catch::Contains("cannot be used"));
  }
}

// A float below 1.2e-38 is denormal; with the mode `flush` (the default) every CPU thread
// reads it as zero (DAZ) and never produces one (FTZ), so the product below is exactly 0 on
// the calling thread and on each thread of the OpenMP pool. `keep` gives back IEEE's value.
TEST_CASE("denormals are flushed on every CPU thread unless kept", "[device]") {
  auto product_on_each_thread = [] {
    std::vector<float> seen(static_cast<size_t>(cpu_threads()) + 1, -1.0f);
    volatile float denormal = 1e-39f, one = 1.0f;
    seen.back() = denormal * one;
#pragma omp parallel num_threads(cpu_threads())
    seen[static_cast<size_t>(omp_get_thread_num())] = denormal * one;
    return seen;
  };
  set_cpu_threads(2);
  CHECK(cpu_denormals() == Denormals::flush);
  for (float v : product_on_each_thread()) CHECK(v == 0.0f);

  set_cpu_denormals(Denormals::keep);
  for (float v : product_on_each_thread()) CHECK(v == 1e-39f);

  set_cpu_denormals(Denormals::flush);  // back to the default for the other tests
  for (float v : product_on_each_thread()) CHECK(v == 0.0f);
  set_cpu_threads(0);
}
