// Op table entries (see op_cases.h) for the image ops: conv2d (strides, paddings and the
// shapes that send the CPU to its im2col, Winograd and direct-loop kernels), max and average
// pooling, global average pooling, batch normalisation in training and evaluation, dropout.
// Each reference is the op's definition written as plain loops in double.
#include <cmath>
#include <iterator>
#include <limits>

#include "autograd/ops.h"
#include "core/philox.h"
#include "op_cases.h"

namespace nnlab_test {

std::vector<double> naive_pool2d(const std::vector<double>& x, const Shape& xs, int64_t kernel, int64_t stride,
                                 int64_t padding, bool max) {
  // y[i, j] = max / mean over kernel offsets (a, b) of x[i·s − p + a, j·s − p + b]; cells
  // outside the image are skipped by max and count as 0 in the mean (÷ kernel²).
  const int64_t h = xs[2], w = xs[3];
  const int64_t p = (h + 2 * padding - kernel) / stride + 1, q = (w + 2 * padding - kernel) / stride + 1;
  std::vector<double> y;
  for (int64_t plane = 0; plane < xs[0] * xs[1]; ++plane)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t a = 0; a < kernel; ++a)
          for (int64_t b = 0; b < kernel; ++b) {
            const int64_t r = i * stride - padding + a, s = j * stride - padding + b;
            if (r < 0 || r >= h || s < 0 || s >= w) continue;
            const double v = x[(plane * h + r) * w + s];
            acc = max ? std::max(acc, v) : acc + v;
          }
        y.push_back(max ? acc : acc / static_cast<double>(kernel * kernel));
      }
  return y;
}

namespace {

struct Conv {
  const char* name;
  int64_t n, c, k, h, w, r, s, stride_h, stride_w, pad_h, pad_w;
  bool bias;
  int64_t p() const { return (h + 2 * pad_h - r) / stride_h + 1; }
  int64_t q() const { return (w + 2 * pad_w - s) / stride_w + 1; }
};

// y[n, o, p, q] = b[o] + Σ_{c, r, s} w[o, c, r, s] · x[n, c, p·stride − pad + r, q·stride − pad + s]
Reference naive_conv2d(const Conv& k, const HostInputs& in) {
  const std::vector<double>&x = in[0], &w = in[1];
  Reference ref{{k.n, k.k, k.p(), k.q()}, {}};
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.k; ++o)
      for (int64_t pi = 0; pi < k.p(); ++pi)
        for (int64_t qi = 0; qi < k.q(); ++qi) {
          double acc = k.bias ? in[2][o] : 0.0;
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t ri = 0; ri < k.r; ++ri)
              for (int64_t si = 0; si < k.s; ++si) {
                const int64_t hi = pi * k.stride_h - k.pad_h + ri, wi = qi * k.stride_w - k.pad_w + si;
                if (hi < 0 || hi >= k.h || wi < 0 || wi >= k.w) continue;
                acc += w[((o * k.c + c) * k.r + ri) * k.s + si] * x[((n * k.c + c) * k.h + hi) * k.w + wi];
              }
          ref.values.push_back(acc);
        }
  return ref;
}

// Each output (and weight gradient) sums many products of values in [−1, 1): the absolute
// tolerances scale with the number of terms.
void set_conv_tolerances(OpCase& c, const Conv& k) {
  const double terms = static_cast<double>(std::max(k.c * k.r * k.s, k.n * k.p() * k.q()));
  c.forward64 = {1e-10, 1e-12 * terms};
  c.forward32 = {1e-5, 1e-6 * terms};
  c.grad32 = {1e-4, 1e-5 * terms};
  c.parity = {1e-5, 1e-6 * terms + 1e-6};
}

void add_conv(std::vector<OpCase>& cases) {
  const Conv convs[] = {
      {"stride 2x1 pad 1x0 3x2 kernel", 2, 2, 3, 5, 4, 3, 2, 2, 1, 1, 0, true},
      {"stride 1x2 pad 1 2x3 kernel no bias", 1, 3, 2, 4, 5, 2, 3, 1, 2, 1, 1, false},
      {"3x3 stride 1 8 channels (Winograd)", 2, 8, 8, 5, 4, 3, 3, 1, 1, 1, 1, true},
      {"3x3 stride 1 3 channels (direct loops)", 2, 3, 5, 6, 7, 3, 3, 1, 1, 1, 1, true},
      {"5x5 lenet-like pad 2 (direct loops)", 2, 1, 6, 7, 6, 5, 5, 1, 1, 2, 2, true},
      {"1x1 kernel", 2, 4, 3, 3, 5, 1, 1, 1, 1, 0, 0, true},
      {"kernel as large as the padded image", 2, 2, 3, 3, 3, 5, 5, 1, 1, 1, 1, true},
  };
  // Two first layers (no input gradient; on CUDA nnlab's direct kernels, filter gradient
  // included), with and without a bias.
  const Conv first_layers[] = {{"first layer 3x3 3 channels", 2, 3, 4, 7, 6, 3, 3, 1, 1, 1, 1, true},
                               {"first layer 5x5 pad 2 1 channel no bias", 2, 1, 3, 6, 5, 5, 5, 1, 1, 2, 2, false}};
  // Every geometry as conv2d; the first four also with a ReLU epilogue: im2col,
  // the no-bias path, Winograd and the direct loops; then the first layers with it.
  const size_t plain = 2 * std::size(convs);
  for (size_t i = 0; i < plain + std::size(first_layers); ++i) {
    const bool first_layer = i >= plain;
    const Conv& k = first_layer ? first_layers[i - plain] : convs[i % std::size(convs)];
    const bool relu = i >= std::size(convs);
    if (relu && !first_layer && i % std::size(convs) >= 4) continue;
    OpCase c;
    c.name = std::string(relu ? "conv2d relu epilogue " : "conv2d ") + k.name;
    c.inputs = {{{k.n, k.c, k.h, k.w}}, {{k.k, k.c, k.r, k.s}}};
    c.inputs[0].grad = !first_layer;
    if (k.bias) c.inputs.push_back({{k.k}});
    c.run = [k, relu](const std::vector<Tensor>& t) {
      const Tensor b = k.bias ? t[2] : Tensor();
      return nnlab::conv2d(t[0], t[1], b, k.stride_h, k.stride_w, k.pad_h, k.pad_w,
                           relu ? nnlab::Epilogue::relu() : nnlab::Epilogue{});
    };
    c.reference = [k, relu](const HostInputs& in) {
      Reference ref = naive_conv2d(k, in);
      if (relu)
        for (double& v : ref.values) v = v > 0.0 ? v : 0.0;
      return ref;
    };
    set_conv_tolerances(c, k);
    cases.push_back(c);
  }
}

// The convolution with a max-pool and ReLU epilogue: the references of
// the three composed. Geometries: Winograd's 3×3 (which pools each plane as it makes it),
// lenet5's 5×5 with padding 2 (direct loops; on CUDA nnlab's direct kernels), and two first
// layers (no input gradient: on CUDA the filter gradient straight from the pool's), one of
// them with odd planes whose last row and column no window holds; each with a 2×2 pool of
// stride 2.
void add_conv_pool(std::vector<OpCase>& cases) {
  struct Pooled {
    Conv conv;
    bool input_grad;
  };
  const Pooled convs[] = {{{"3x3 stride 1 8 channels (Winograd)", 2, 8, 8, 6, 8, 3, 3, 1, 1, 1, 1, true}, true},
                          {{"5x5 lenet-like pad 2 (direct loops)", 2, 1, 6, 8, 6, 5, 5, 1, 1, 2, 2, true}, true},
                          {{"3x3 pad 1 first layer 1 channel", 3, 1, 4, 8, 6, 3, 3, 1, 1, 1, 1, true}, false},
                          {{"3x3 pad 0 first layer 3 channels odd planes", 2, 3, 5, 9, 11, 3, 3, 1, 1, 0, 0, true},
                           false}};
  for (const Pooled& pooled : convs) {
    const Conv& k = pooled.conv;
    OpCase c;
    c.name = std::string("conv2d max-pool epilogue ") + k.name;
    c.inputs = {{{k.n, k.c, k.h, k.w}}, {{k.k, k.c, k.r, k.s}}, {{k.k}}};
    c.inputs[0].grad = pooled.input_grad;
    c.run = [k](const std::vector<Tensor>& t) { return nnlab::conv2d(t[0], t[1], t[2], 1, k.pad_h, nnlab::Epilogue::relu_max_pool(2)); };
    c.reference = [k](const HostInputs& in) {
      const Reference conv = naive_conv2d(k, in);
      std::vector<double> y = naive_pool2d(conv.values, conv.shape, 2, 2, 0, true);
      for (double& v : y) v = v > 0.0 ? v : 0.0;
      return Reference{{k.n, k.k, k.p() / 2, k.q() / 2}, y};
    };
    set_conv_tolerances(c, k);
    cases.push_back(c);
  }
}

void add_pool(std::vector<OpCase>& cases) {
  struct Pool {
    const char* name;
    Shape x;
    int64_t kernel, stride, padding;
  };
  const Pool pools[] = {{"2x2 stride 2 odd sizes", {2, 3, 7, 9}, 2, 2, 0},
                        {"3x3 stride 2 pad 1", {2, 3, 7, 9}, 3, 2, 1},
                        {"4x4 stride 3 pad 2 (half the kernel)", {2, 2, 5, 8}, 4, 3, 2},
                        {"3x3 stride 1 pad 1 batch 1", {1, 3, 9, 5}, 3, 1, 1}};
  for (bool max : {true, false})
    for (const Pool& pl : pools) {
      OpCase c;
      c.name = std::string(max ? "max_pool2d " : "avg_pool2d ") + pl.name;
      c.inputs = {{pl.x}};
      c.inputs[0].tie_free = max;  // a finite-difference step never changes a window's winner
      c.run = [pl, max](const std::vector<Tensor>& t) {
        return max ? nnlab::max_pool2d(t[0], pl.kernel, pl.stride, pl.padding)
                   : nnlab::avg_pool2d(t[0], pl.kernel, pl.stride, pl.padding);
      };
      c.reference = [pl, max](const HostInputs& in) {
        const int64_t p = (pl.x[2] + 2 * pl.padding - pl.kernel) / pl.stride + 1;
        const int64_t q = (pl.x[3] + 2 * pl.padding - pl.kernel) / pl.stride + 1;
        return Reference{{pl.x[0], pl.x[1], p, q}, naive_pool2d(in[0], pl.x, pl.kernel, pl.stride, pl.padding, max)};
      };
      c.parity = {1e-6, 1e-7};
      cases.push_back(c);
    }
  // The fused max-pool + ReLU: relu of the same reference (inputs in [−1, 1], so about half the
  // windows' max is negative and gives no gradient).
  for (const Pool& pl : pools) {
    OpCase c;
    c.name = std::string("max_pool2d_relu ") + pl.name;
    c.inputs = {{pl.x}};
    c.inputs[0].tie_free = true;
    c.run = [pl](const std::vector<Tensor>& t) { return nnlab::max_pool2d_relu(t[0], pl.kernel, pl.stride, pl.padding); };
    c.reference = [pl](const HostInputs& in) {
      const int64_t p = (pl.x[2] + 2 * pl.padding - pl.kernel) / pl.stride + 1;
      const int64_t q = (pl.x[3] + 2 * pl.padding - pl.kernel) / pl.stride + 1;
      std::vector<double> y = naive_pool2d(in[0], pl.x, pl.kernel, pl.stride, pl.padding, true);
      for (double& v : y) v = v > 0 ? v : 0.0;
      return Reference{{pl.x[0], pl.x[1], p, q}, y};
    };
    c.parity = {1e-6, 1e-7};
    cases.push_back(c);
  }

  OpCase gap;
  gap.name = "adaptive_avg_pool2d_1x1";
  gap.inputs = {{{2, 3, 4, 5}}};
  gap.run = [](const std::vector<Tensor>& t) { return nnlab::adaptive_avg_pool2d_1x1(t[0]); };
  // The mean of each 4×5 plane (20 values).
  gap.reference = [](const HostInputs& in) {
    Reference r{{2, 3, 1, 1}, std::vector<double>(6, 0.0)};
    for (size_t i = 0; i < in[0].size(); ++i) r.values[i / 20] += in[0][i] / 20;
    return r;
  };
  cases.push_back(gap);
}

// y = γ·(x − mean)/√(var + eps) + β per channel, with the batch's mean and biased variance in
// training, the running ones (inputs 3 and 4) in evaluation.
Reference naive_batchnorm(const HostInputs& in, const Shape& s, bool training, double eps) {
  const int64_t n = s[0], c = s[1], inner = s[2] * s[3], m = n * inner;
  Reference ref{s, std::vector<double>(in[0].size())};
  for (int64_t j = 0; j < c; ++j) {
    double mean = in[3][j], var = in[4][j];
    if (training) {
      mean = var = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) mean += in[0][(i * c + j) * inner + k] / m;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) var += std::pow(in[0][(i * c + j) * inner + k] - mean, 2) / m;
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t at = (i * c + j) * inner + k;
        ref.values[at] = in[1][j] * (in[0][at] - mean) / std::sqrt(var + eps) + in[2][j];
      }
  }
  return ref;
}

void add_batchnorm(std::vector<OpCase>& cases) {
  const Shape s{3, 4, 3, 5};
  for (bool training : {true, false}) {
    OpCase c;
    c.name = training ? "batch_norm2d training" : "batch_norm2d evaluation";
    c.inputs = {{s, -1.0, 2.0}, {{4}, 0.5, 1.5}, {{4}}, constant({4}), constant({4}, 0.5, 2.0)};
    // The op updates the running statistics in place: each run works on copies, so a
    // gradient check's many runs all see the same ones.
    c.run = [training](const std::vector<Tensor>& t) {
      Tensor rm = t[3].clone(), rv = t[4].clone();
      return nnlab::batch_norm2d(t[0], t[1], t[2], rm, rv, training, 0.1, 1e-5);
    };
    c.reference = [s, training](const HostInputs& in) { return naive_batchnorm(in, s, training, 1e-5); };
    c.forward64 = {1e-10, 1e-10};
    c.forward32 = {1e-4, 1e-5};
    c.grad32 = {1e-3, 1e-4};
    c.parity = {1e-4, 1e-5};
    cases.push_back(c);
  }
}

void add_dropout(std::vector<OpCase>& cases) {
  // A fixed seed and stream fix the mask, so the gradient check differentiates one function;
  // 37 columns leave the last Philox block of four words partly used.
  const double p = 0.4;
  const uint64_t seed = 123;
  const uint32_t stream = 7;
  OpCase c;
  c.name = "dropout p 0.4";
  c.inputs = {{{4, 37}}};
  c.run = [=](const std::vector<Tensor>& t) { return nnlab::dropout(t[0], p, seed, stream, true); };
  c.reference = [=](const HostInputs& in) {
    // Keep element i iff its u32 draw ≥ ⌊p·2³²⌋, scaled by 1/(1 − p).
    const uint64_t threshold = static_cast<uint64_t>(std::floor(p * 4294967296.0));
    Reference r{{4, 37}, {}};
    for (size_t i = 0; i < in[0].size(); ++i) {
      const uint32_t draw = nnlab::philox_u32(seed, static_cast<uint32_t>(nnlab::RandomPurpose::Dropout), stream, i);
      r.values.push_back(draw >= threshold ? in[0][i] / (1 - p) : 0.0);
    }
    return r;
  };
  c.parity = {1e-7, 0};
  c.mask_parity = true;
  cases.push_back(c);
}

}  // namespace

void add_spatial_cases(std::vector<OpCase>& cases) {
  add_conv(cases);
  add_conv_pool(cases);
  add_pool(cases);
  add_batchnorm(cases);
  add_dropout(cases);
}

}  // namespace nnlab_test
