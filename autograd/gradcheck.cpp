#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace nnlab {

namespace {
// L = Σ_i y_i · r_i, accumulated in double on the host.
double projected(const Tensor& y, const std::vector<double>& r) {
  const std::vector<double> v = y.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * r[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, double eps, double atol,
                          double rtol) {
  for (const Tensor& t : inputs)
    NNLAB_CHECK(t.dtype() != DType::Float32, "gradcheck: inputs must be float64 (or integer), got ", t.describe());
  GradcheckResult result;
  Tensor y = f(inputs);
  Tensor r_t = Tensor::empty(y.shape(), DType::Float64);
  uniform_fill(r_t, -1.0, 1.0, RandomStream{12345, RandomPurpose::Init, 999});
  const std::vector<double> r = r_t.to_vector<double>();

  // Analytic: backward of L = Σ y ⊙ r, i.e. seed dy = r.
  for (const Tensor& t : inputs)
    if (t.requires_grad()) const_cast<Tensor&>(t).set_grad(Tensor());
  y.backward(r_t);

  std::ostringstream report;
  int shown = 0;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    const std::vector<double> analytic = x.grad().defined() ? x.grad().to_vector<double>()
                                                            : std::vector<double>(x.numel(), 0.0);
    double* xv = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = xv[i];
      xv[i] = saved + eps;
      const double plus = projected(f(inputs), r);
      xv[i] = saved - eps;
      const double minus = projected(f(inputs), r);
      xv[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double err = std::fabs(numeric - analytic[i]);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (err > atol + rtol * std::fabs(numeric)) {
        result.ok = false;
        if (shown++ < 8)
          report << "input " << k << " element " << i << ": analytic " << analytic[i] << ", numeric " << numeric
                 << "\n";
      }
    }
  }
  result.report = report.str();
  return result;
}

}  // namespace nnlab
