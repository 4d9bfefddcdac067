// The op case table: every differentiable op of autograd/ops.h, as data. One entry names the
// op, the shapes (and value ranges) of its inputs, how to run it through the public autograd
// API, a naive reference for its forward pass (plain loops in double), and its tolerances.
// Three runners read the same table:
//   tests/test_op_table.cpp          forward against the reference in float64 and float32,
//                                    float32 gradients against float64 ones, and gradcheck
//                                    (central differences, float64) of every input marked grad;
//   tests/gpu/test_gpu_op_table.cpp  CUDA forward and gradients (autograd backward) against the
//                                    CPU's, in float32, on fresh random inputs (the CUDA
//                                    simulator runs it too); the cases marked gemm once more
//                                    on each of nnlab's own GEMM kernels (--gemm-impl).
// Adding an op (or a new shape of one) is one entry in op_cases_dense.cpp or
// op_cases_spatial.cpp; tests of bad inputs, edge cases and fixtures stay in each op's file.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nnlab_test {

using nnlab::DType;
using nnlab::Shape;
using nnlab::Tensor;

// How one input of a case is drawn.
struct OpInput {
  Shape shape;
  double lo = -1.0, hi = 1.0;  // uniform in [lo, hi)
  bool grad = true;            // differentiated: gradcheck, float32 and CUDA gradients checked
  int64_t classes = 0;         // > 0: int32 labels in [0, classes) instead of floats
  bool tie_free = false;       // distinct values 0.01 apart, so a small step never changes a max
};

inline OpInput labels(int64_t n, int64_t classes) { return {{n}, 0, 0, false, classes}; }
inline OpInput constant(Shape shape, double lo = -1.0, double hi = 1.0) { return {shape, lo, hi, false}; }

struct Tolerance {
  double rtol, atol;  // |got − want| ≤ atol + rtol·|want|, element by element
};

struct GradcheckTolerance {
  double eps = 1e-6, atol = 1e-6, rtol = 1e-4;  // autograd/gradcheck.h's defaults
};

// The naive reference's answer: the output's shape and values.
struct Reference {
  Shape shape;
  std::vector<double> values;
};

// The inputs' values in float64 (labels as whole numbers), in the order of OpCase::inputs.
using HostInputs = std::vector<std::vector<double>>;

struct OpCase {
  std::string name;  // unique; no ',' or ';' (Catch and CTest filters split on them)
  std::vector<OpInput> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> run;  // through autograd/ops.h only
  std::function<Reference(const HostInputs&)> reference;
  Tolerance forward64{1e-10, 1e-12};  // float64 forward against the reference
  Tolerance forward32{1e-5, 1e-6};    // float32 forward against the reference
  Tolerance grad32{1e-4, 1e-5};       // float32 gradients against the float64 ones
  GradcheckTolerance gradcheck;
  Tolerance parity{1e-5, 1e-6};  // CUDA against the CPU, float32, forward and gradients
  bool mask_parity = false;      // dropout: which outputs are zero must agree bit for bit
  bool gemm = false;             // runs Backend::gemm: the GPU runner repeats it on every --gemm-impl rung
};

// The whole table, built once.
const std::vector<OpCase>& op_cases();

// The entries of each family file, gathered by op_cases().
void add_dense_cases(std::vector<OpCase>& cases);
void add_spatial_cases(std::vector<OpCase>& cases);

// Draws a case's inputs on the host: floats in `dtype`, labels in int32, input i from stream
// i of `seed`. None requires a gradient yet.
std::vector<Tensor> draw_inputs(const OpCase& c, uint64_t seed, DType dtype);

// The float inputs converted to `dtype` (labels as they are), gradients asked for where the
// case says grad, as fresh leaves.
std::vector<Tensor> leaves_as(const OpCase& c, const std::vector<Tensor>& inputs, DType dtype);

// Naive references shared with the ops' own test files. x is NCHW with shape xs.
std::vector<double> naive_pool2d(const std::vector<double>& x, const Shape& xs, int64_t kernel, int64_t stride,
                                 int64_t padding, bool max);

}  // namespace nnlab_test
