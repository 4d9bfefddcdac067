// Every case of the op table (op_cases.h) on the CPU: the forward pass against the case's
// naive reference in float64 and in float32, the float32 gradients against the float64 ones,
// and the float64 gradients against central finite differences (autograd/gradcheck.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "op_cases.h"
#include "test_support.h"

using namespace nnlab_test;

namespace {
constexpr uint64_t kOpTableSeed = 2024;
}  // namespace

// Complete by construction: every differentiable op autograd/ops.h declares (a function
// returning a Tensor) has a case named after it, read from the header itself, so an op added
// there without a case fails here.
TEST_CASE("op table: every op autograd/ops.h declares has an entry", "[ops][op_table]") {
  std::ifstream header(std::string(NNLAB_TEST_DIR) + "/../autograd/ops.h");
  REQUIRE(header.good());
  // Declared there but not ops of a model: the non-finite flag is a device buffer.
  const std::set<std::string> not_ops = {"make_nonfinite_flag"};
  const std::regex declaration(R"(^Tensor ([a-z_0-9]+)\()");
  std::vector<std::string> ops;
  std::smatch m;
  for (std::string line; std::getline(header, line);)
    if (std::regex_search(line, m, declaration) && !not_ops.count(m[1])) ops.push_back(m[1]);
  CHECK(ops.size() >= 22);  // the reader found the declarations
  // The fused epilogues are the ops' own arguments: each has cases of its own.
  for (const std::string prefix : {"conv2d relu epilogue ", "conv2d max-pool epilogue ", "linear relu epilogue "})
    CHECK(std::any_of(op_cases().begin(), op_cases().end(),
                      [&](const OpCase& c) { return c.name.rfind(prefix, 0) == 0; }));
  for (const std::string& op : ops) {
    INFO(op);
    CHECK(std::any_of(op_cases().begin(), op_cases().end(),
                      [&](const OpCase& c) { return c.name == op || c.name.rfind(op + " ", 0) == 0; }));
  }
}

TEST_CASE("op table: forward matches the naive reference in float64 and float32", "[ops][op_table]") {
  for (const OpCase& c : op_cases()) {
    DYNAMIC_SECTION(c.name) {
      const std::vector<Tensor> inputs = draw_inputs(c, kOpTableSeed, DType::Float64);
      HostInputs host;
      for (const Tensor& t : inputs) host.push_back(t.to_vector<double>());
      const Reference ref = c.reference(host);
      for (DType dtype : {DType::Float64, DType::Float32}) {
        const bool f64 = dtype == DType::Float64;
        const Tensor y = c.run(leaves_as(c, inputs, dtype));
        CHECK(y.shape() == ref.shape);
        CHECK(y.dtype() == dtype);
        const Tolerance tol = f64 ? c.forward64 : c.forward32;
        require_allclose(y.to_vector<double>(), ref.values, tol.rtol, tol.atol,
                         c.name + (f64 ? " float64" : " float32") + " forward");
      }
    }
  }
}

TEST_CASE("op table: gradients pass gradcheck in float64 and float32 follows them", "[ops][op_table][gradcheck]") {
  for (const OpCase& c : op_cases()) {
    DYNAMIC_SECTION(c.name) {
      const std::vector<Tensor> inputs = draw_inputs(c, kOpTableSeed, DType::Float64);
      const nnlab::GradcheckResult r =
          nnlab::gradcheck(c.run, leaves_as(c, inputs, DType::Float64), c.gradcheck.eps, c.gradcheck.atol,
                           c.gradcheck.rtol);
      INFO(c.name << " gradcheck: max abs error " << r.max_abs_error << "\n" << r.report);
      REQUIRE(r.ok);

      // The same backward pass in both dtypes, seeded with one random dy.
      const std::vector<Tensor> in64 = leaves_as(c, inputs, DType::Float64);
      const std::vector<Tensor> in32 = leaves_as(c, inputs, DType::Float32);
      const Tensor y64 = c.run(in64), y32 = c.run(in32);
      const Tensor dy = random_tensor(y64.shape(), kOpTableSeed, 1000);
      y64.backward(dy);
      y32.backward(dy.to(DType::Float32));
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!c.inputs[i].grad) continue;
        const std::string what = c.name + " input " + std::to_string(i) + " gradient";
        REQUIRE(in64[i].grad().defined());
        REQUIRE(in32[i].grad().defined());
        CHECK(in32[i].grad().dtype() == DType::Float32);
        require_allclose(in32[i].grad(), in64[i].grad(), c.grad32.rtol, c.grad32.atol, what + " float32 vs float64");
      }
    }
  }
}
