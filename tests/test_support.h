// Helpers shared by the CPU tests (tests/) and the GPU tests (tests/gpu/): seeded random
// tensors, a scratch folder, and the two closeness checks. The two checks answer different
// questions, hence two names:
//   require_allclose       every element on its own: |got − want| ≤ atol + rtol·|want|
//                          (numpy.allclose), for results that should match element by element;
//   require_close_to_scale every element within eps of the *largest* |want|, for long sums
//                          that cancel to near zero, where an element's own magnitude would
//                          measure only the rounding of its terms.
// Both make one assertion per tensor and name the worst element when it fails.
#pragma once
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace nnlab_test {

using nnlab::DType;
using nnlab::Shape;
using nnlab::Tensor;

// Values uniform in [lo, hi), drawn in `dtype` from (seed, Init, stream): the same arguments
// give the same tensor. Not requiring a gradient; chain .set_requires_grad(true) for that.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, uint32_t stream, DType dtype = DType::Float64,
                            double lo = -1.0, double hi = 1.0) {
  Tensor t = Tensor::empty(shape, dtype);
  nnlab::uniform_fill(t, lo, hi, nnlab::RandomStream{seed, nnlab::RandomPurpose::Init, stream});
  return t;
}

// A fresh, empty folder under the system temp folder, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "nnlab_test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Sets an environment variable for the scope's life (children the test starts inherit it),
// then restores what was there.
struct ScopedEnv {
  std::string name, old;
  bool had = false;
  ScopedEnv(const std::string& n, const std::string& value) : name(n) {
    if (const char* v = std::getenv(n.c_str())) had = true, old = v;
    setenv(n.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { had ? (void)setenv(name.c_str(), old.c_str(), 1) : (void)unsetenv(name.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

// The largest |got − want| / (atol + rtol·|want|) of equal-length vectors and where it is
// (≤ 1 is within the tolerance; NaN on one side only counts as infinite).
struct Excess {
  double worst = 0.0;
  size_t at = 0;
};
inline Excess worst_excess(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  Excess e;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(want[i]) && std::isnan(got[i]))) continue;
    const double excess = std::fabs(got[i] - want[i]) / (atol + rtol * std::fabs(want[i]));
    if (!(excess <= e.worst)) {  // also catches NaN on one side only
      e.worst = std::isnan(excess) ? INFINITY : excess;
      e.at = i;
    }
  }
  return e;
}

// Every element satisfies |got − want| ≤ atol + rtol·|want|; NaN only where want has NaN.
// Exact equality always passes, so rtol = atol = 0 asks for identical values.
inline void require_allclose(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                             const std::string& what) {
  INFO(what << ": " << got.size() << " elements, expected " << want.size());
  REQUIRE(got.size() == want.size());
  const Excess excess = worst_excess(got, want, rtol, atol);
  const double worst = excess.worst;
  const size_t worst_at = excess.at;
  INFO(what << ": worst element " << worst_at << " of " << got.size() << ": got "
            << (got.empty() ? 0 : got[worst_at]) << ", want " << (want.empty() ? 0 : want[worst_at]) << " ("
            << worst << "× the tolerance rtol " << rtol << " atol " << atol << ")");
  REQUIRE(worst <= 1.0);
}

inline void require_allclose(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  require_allclose(got.to_vector<double>(), want.to_vector<double>(), rtol, atol, what);
}

// Every element within eps·max|want| of want (see the top of the file for when to use it).
inline void require_close_to_scale(const std::vector<double>& got, const std::vector<double>& want, double eps,
                                   const std::string& what) {
  INFO(what << ": " << got.size() << " elements, expected " << want.size());
  REQUIRE(got.size() == want.size());
  double scale = 0, worst = 0;
  size_t worst_at = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]) / std::max(scale, 1e-30);
    if (err > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err, worst_at = i;
  }
  INFO(what << ": worst error " << worst << " of the scale " << scale << " at element " << worst_at << " (got "
            << (got.empty() ? 0 : got[worst_at]) << ", want " << (want.empty() ? 0 : want[worst_at]) << ")");
  REQUIRE(worst <= eps);
}

// How often `what` occurs in `text`, overlapping occurrences included.
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Writes `bytes` to the file `path` as they are.
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

}  // namespace nnlab_test
