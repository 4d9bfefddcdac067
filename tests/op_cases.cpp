// The table's assembly and the input drawing shared by its runners (see op_cases.h).
#include "op_cases.h"

#include <set>

#include "core/error.h"
#include "core/random.h"

namespace nnlab_test {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    add_dense_cases(all);
    add_spatial_cases(all);
    std::set<std::string> names;
    for (const OpCase& c : all)
      NNLAB_CHECK(names.insert(c.name).second && c.name.find_first_of(",;") == std::string::npos,
                  "op table: duplicate or unfilterable case name '", c.name, "'");
    return all;
  }();
  return cases;
}

std::vector<Tensor> draw_inputs(const OpCase& c, uint64_t seed, DType dtype) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const OpInput& in = c.inputs[i];
    const nnlab::RandomStream rs{seed, nnlab::RandomPurpose::Init, static_cast<uint32_t>(i)};
    const int64_t n = nnlab::shape_numel(in.shape);
    if (in.classes > 0) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<int32_t>(rs.below(static_cast<uint64_t>(k), in.classes));
      inputs.push_back(Tensor::from_vector(v, in.shape));
    } else if (in.tie_free) {
      // A shuffled ramp: no two values closer than 0.01, centred on 0 but none nearer to it
      // than 0.0025 (a ReLU's kink, where a finite difference would straddle it).
      const std::vector<int32_t> perm = nnlab::random_permutation(n, rs);
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) v[k] = 0.01 * perm[k] - 0.005 * static_cast<double>(n) + 0.0025;
      inputs.push_back(Tensor::from_vector(v, in.shape).to(dtype));
    } else {
      Tensor t = Tensor::empty(in.shape, dtype);
      nnlab::uniform_fill(t, in.lo, in.hi, rs);
      inputs.push_back(t);
    }
  }
  return inputs;
}

std::vector<Tensor> leaves_as(const OpCase& c, const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = c.inputs[i].classes > 0 ? inputs[i].detach() : inputs[i].detach().to(dtype);
    if (t.same_storage(inputs[i])) t = t.clone();  // a fresh leaf, whatever the input was
    if (c.inputs[i].grad) t.set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

}  // namespace nnlab_test
