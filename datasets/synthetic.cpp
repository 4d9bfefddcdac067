#include "datasets/synthetic.h"

#include "core/random.h"

namespace nnlab {

Dataset synthetic_dataset(const std::string& name, const std::string& split) {
  NNLAB_CHECK(name == "synthetic-cifar10", "unknown synthetic data set '", name, "'; use synthetic-cifar10");
  NNLAB_CHECK(split == "train" || split == "test", "unknown split '", split, "'; use train or test");
  const bool train = split == "train";
  const int64_t n = train ? 50000 : 10000;
  const uint32_t stream = train ? 0 : 1;
  Dataset d;
  d.name = name;
  d.classes = 10;
  for (int i = 0; i < 10; ++i) d.class_names.push_back("class" + std::to_string(i));
  d.images = Tensor::empty({n, 3, 32, 32});
  float* x = d.images.data<float>();
  const RandomStream pixels{1234, RandomPurpose::Split, 100 + stream};
  // Pixel i is draw i: a block of four draws per Philox call, blocks spread over the threads
  // (the draws do not depend on who computes them). 3 × 32 × 32 is a multiple of 4.
  const int64_t blocks = d.images.numel() / 4;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const PhiloxBlock draws = pixels.block(static_cast<uint64_t>(b));
    for (int w = 0; w < 4; ++w) x[4 * b + w] = u32_to_unit_float(draws.v[w]);
  }
  d.labels = Tensor::empty({n}, DType::Int32);
  int32_t* y = d.labels.data<int32_t>();
  const RandomStream labels{1234, RandomPurpose::Split, 200 + stream};
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(labels.below(static_cast<uint64_t>(i), 10));
  return d;
}

}  // namespace nnlab
