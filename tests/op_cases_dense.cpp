// Op table entries (see op_cases.h) for the dense ops: elementwise with broadcasting,
// activations, matmul and linear, reductions and reshapes, log-softmax and cross-entropy.
// Each reference is the op's definition written as plain loops in double.
#include <cmath>

#include "autograd/ops.h"
#include "op_cases.h"

namespace nnlab_test {

namespace {

using Fn = std::function<double(double, double)>;

// a ∘ b where the smaller operand's shape is a suffix of the larger's: element i of the
// larger meets element i mod numel(smaller) of the smaller.
Reference broadcast_binary(const HostInputs& in, const Shape& sa, const Shape& sb, const Fn& f) {
  const bool a_big = in[0].size() >= in[1].size();
  const std::vector<double>& big = a_big ? in[0] : in[1];
  const std::vector<double>& small = a_big ? in[1] : in[0];
  Reference r{a_big ? sa : sb, {}};
  for (size_t i = 0; i < big.size(); ++i) {
    const double s = small[i % small.size()];
    r.values.push_back(a_big ? f(big[i], s) : f(s, big[i]));
  }
  return r;
}

void add_binary(std::vector<OpCase>& cases) {
  struct Op {
    const char* name;
    Tensor (*run)(const Tensor&, const Tensor&);
    Fn f;
  };
  const Op ops[] = {{"add", nnlab::add, [](double a, double b) { return a + b; }},
                    {"sub", nnlab::sub, [](double a, double b) { return a - b; }},
                    {"mul", nnlab::mul, [](double a, double b) { return a * b; }},
                    {"div", nnlab::div, [](double a, double b) { return a / b; }}};
  struct Layout {
    const char* name;
    Shape a, b;
  };
  const Layout layouts[] = {{"same shape", {4, 5}, {4, 5}},
                            {"row on the right", {4, 5}, {5}},
                            {"row on the left", {5}, {4, 5}},
                            {"scalar on the right", {3, 2, 4}, {}},
                            {"plane over a batch", {4, 3}, {2, 4, 3}}};
  for (const Op& op : ops)
    for (const Layout& l : layouts) {
      OpCase c;
      c.name = std::string(op.name) + " " + l.name;
      // Both operands away from 0, so div and its gradient stay well conditioned.
      c.inputs = {{l.a, 0.5, 2.0}, {l.b, 0.5, 2.0}};
      c.run = [f = op.run](const std::vector<Tensor>& t) { return f(t[0], t[1]); };
      c.reference = [l, f = op.f](const HostInputs& in) { return broadcast_binary(in, l.a, l.b, f); };
      c.parity = {1e-5, 1e-6};
      cases.push_back(c);
    }
}

void add_activations(std::vector<OpCase>& cases) {
  struct Act {
    const char* name;
    Tensor (*run)(const Tensor&);
    double (*f)(double);
  };
  const Act acts[] = {{"relu", nnlab::relu, [](double x) { return x > 0 ? x : 0.0; }},
                      {"sigmoid", nnlab::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }},
                      {"tanh", nnlab::tanh, [](double x) { return std::tanh(x); }}};
  for (const Act& a : acts) {
    OpCase c;
    c.name = a.name;
    c.inputs = {{{3, 7}, -3.0, 3.0}};
    c.run = [f = a.run](const std::vector<Tensor>& t) { return f(t[0]); };
    c.reference = [f = a.f](const HostInputs& in) {
      Reference r{{3, 7}, {}};
      for (double x : in[0]) r.values.push_back(f(x));
      return r;
    };
    c.parity = {2e-6, 1e-7};
    cases.push_back(c);
  }
}

// y = a · bᵀ (+ bias) when b_transposed, else a · b; a: (m, k).
std::vector<double> naive_product(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k,
                                  int64_t n, bool b_transposed, const std::vector<double>* bias) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? (*bias)[j] : 0.0;
      for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * (b_transposed ? b[j * k + p] : b[p * n + j]);
      y[i * n + j] = s;
    }
  return y;
}

void add_products(std::vector<OpCase>& cases) {
  OpCase mm;
  mm.name = "matmul";
  mm.inputs = {{{5, 7}}, {{7, 3}}};
  mm.run = [](const std::vector<Tensor>& t) { return nnlab::matmul(t[0], t[1]); };
  mm.reference = [](const HostInputs& in) {
    return Reference{{5, 3}, naive_product(in[0], in[1], 5, 7, 3, false, nullptr)};
  };
  mm.parity = mm.forward32 = {1e-5, 1e-5};
  mm.gemm = true;  // and every linear below, copied from it
  cases.push_back(mm);

  OpCase lin = mm;
  lin.name = "linear with bias";
  lin.inputs = {{{6, 7}}, {{4, 7}}, {{4}}};
  lin.run = [](const std::vector<Tensor>& t) { return nnlab::linear(t[0], t[1], t[2]); };
  lin.reference = [](const HostInputs& in) {
    return Reference{{6, 4}, naive_product(in[0], in[1], 6, 7, 4, true, &in[2])};
  };
  cases.push_back(lin);

  lin.name = "linear without bias";
  lin.inputs.pop_back();
  lin.run = [](const std::vector<Tensor>& t) { return nnlab::linear(t[0], t[1], Tensor()); };
  lin.reference = [](const HostInputs& in) {
    return Reference{{6, 4}, naive_product(in[0], in[1], 6, 7, 4, true, nullptr)};
  };
  cases.push_back(lin);

  // The Linear layer and its ReLU fused: the same product, floored at 0.
  const auto relu_of = [](std::vector<double> y) {
    for (double& v : y) v = v > 0.0 ? v : 0.0;
    return y;
  };
  lin.name = "linear relu epilogue with bias";
  lin.inputs = {{{6, 7}}, {{4, 7}}, {{4}}};
  lin.run = [](const std::vector<Tensor>& t) { return nnlab::linear(t[0], t[1], t[2], nnlab::Epilogue::relu()); };
  lin.reference = [relu_of](const HostInputs& in) {
    return Reference{{6, 4}, relu_of(naive_product(in[0], in[1], 6, 7, 4, true, &in[2]))};
  };
  cases.push_back(lin);

  lin.name = "linear relu epilogue without bias";
  lin.inputs.pop_back();
  lin.run = [](const std::vector<Tensor>& t) { return nnlab::linear(t[0], t[1], Tensor(), nnlab::Epilogue::relu()); };
  lin.reference = [relu_of](const HostInputs& in) {
    return Reference{{6, 4}, relu_of(naive_product(in[0], in[1], 6, 7, 4, true, nullptr))};
  };
  cases.push_back(lin);
}

void add_reductions_and_reshapes(std::vector<OpCase>& cases) {
  const Shape s{2, 3, 4};
  auto total = [](const std::vector<double>& v) {
    double t = 0;
    for (double e : v) t += e;
    return t;
  };
  OpCase c;
  c.name = "sum";
  c.inputs = {{s}};
  c.run = [](const std::vector<Tensor>& t) { return nnlab::sum(t[0]); };
  c.reference = [total](const HostInputs& in) { return Reference{{}, {total(in[0])}}; };
  c.forward32 = c.parity = {1e-5, 1e-5};
  cases.push_back(c);

  c.name = "mean";
  c.run = [](const std::vector<Tensor>& t) { return nnlab::mean(t[0]); };
  c.reference = [total](const HostInputs& in) { return Reference{{}, {total(in[0]) / 24}}; };
  cases.push_back(c);

  // The reshapes move no values: the reference is the input under its new shape, so float32
  // is off by its own rounding of the input only, and CUDA not at all.
  c.name = "reshape with an inferred extent";
  c.run = [](const std::vector<Tensor>& t) { return nnlab::reshape(t[0], {-1, 6}); };
  c.reference = [](const HostInputs& in) { return Reference{{4, 6}, in[0]}; };
  c.forward32 = {1e-7, 0};
  c.parity = {0, 0};
  cases.push_back(c);

  c.name = "flatten";
  c.inputs = {{{2, 3, 2, 2}}};
  c.run = [](const std::vector<Tensor>& t) { return nnlab::flatten(t[0]); };
  c.reference = [](const HostInputs& in) { return Reference{{2, 12}, in[0]}; };
  cases.push_back(c);
}

// Row-wise log of the softmax of x: (n, c), computed by the definition log(e^x / Σ e^x).
std::vector<double> naive_log_softmax(const std::vector<double>& x, int64_t n, int64_t c) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double z = 0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(x[i * c + j]);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = x[i * c + j] - std::log(z);
  }
  return y;
}

void add_softmax(std::vector<OpCase>& cases) {
  OpCase ls;
  ls.name = "log_softmax";
  ls.inputs = {{{4, 5}, -5.0, 5.0}};
  ls.run = [](const std::vector<Tensor>& t) { return nnlab::log_softmax(t[0]); };
  ls.reference = [](const HostInputs& in) { return Reference{{4, 5}, naive_log_softmax(in[0], 4, 5)}; };
  ls.parity = {1e-5, 1e-5};
  cases.push_back(ls);

  for (int64_t classes : {5, 10}) {
    OpCase ce;
    ce.name = "cross_entropy over " + std::to_string(classes) + " classes";
    const int64_t n = classes == 5 ? 4 : 33;
    ce.inputs = {{{n, classes}, -5.0, 5.0}, labels(n, classes)};
    ce.run = [](const std::vector<Tensor>& t) { return nnlab::cross_entropy(t[0], t[1]); };
    ce.reference = [n, classes](const HostInputs& in) {
      const std::vector<double> ls = naive_log_softmax(in[0], n, classes);
      double loss = 0;
      for (int64_t i = 0; i < n; ++i) loss -= ls[i * classes + static_cast<int64_t>(in[1][i])] / n;
      return Reference{{}, {loss}};
    };
    ce.forward32 = ce.parity = {1e-5, 1e-5};
    cases.push_back(ce);
  }
}

// cast there and back through float32: the identity up to float32's rounding, and its gradient,
// 1, checked by differences wide enough for that rounding to vanish in them. Through bf16 the
// round trip is a step function, whose straight-through gradient differences cannot check:
// tests/test_precision.cpp checks it, and tests/test_bfloat16.cpp the rounding.
void add_casts(std::vector<OpCase>& cases) {
  OpCase f32;
  f32.name = "cast float32 round trip";
  f32.inputs = {{{4, 5}}};
  f32.run = [](const std::vector<Tensor>& t) { return nnlab::cast(nnlab::cast(t[0], DType::Float32), t[0].dtype()); };
  f32.reference = [](const HostInputs& in) { return Reference{{4, 5}, in[0]}; };
  f32.forward64 = {1e-7, 1e-12};
  f32.gradcheck = GradcheckTolerance{1e-2, 1e-5, 1e-4};
  cases.push_back(f32);
  // cast_made: the same round trip with the first cast's copy made outside the op (as a
  // multi-tensor cast makes the weights' bf16 copies), the gradient through the op.
  OpCase made = f32;
  made.name = "cast_made round trip";
  made.run = [](const std::vector<Tensor>& t) {
    const DType other = t[0].dtype() == DType::Float64 ? DType::Float32 : DType::Float64;
    return nnlab::cast(nnlab::cast_made(t[0], t[0].detach().to(other)), t[0].dtype());
  };
  cases.push_back(made);
}

}  // namespace

void add_dense_cases(std::vector<OpCase>& cases) {
  add_casts(cases);
  add_binary(cases);
  add_activations(cases);
  add_products(cases);
  add_reductions_and_reshapes(cases);
  add_softmax(cases);
}

}  // namespace nnlab_test
