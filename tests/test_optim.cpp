// SGD, Adam and AdamW against PyTorch 1.13 (tests/fixtures/optim_steps.json, written by
// tests/fixtures/gen_optim.py): the same parameters and gradients for 5 steps, parameters and
// optimizer state compared after every step, in float64 and float32.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

using nlohmann::json;
using namespace nnlab;

namespace {

json load_steps_fixture() {
  std::ifstream in(NNLAB_TEST_DIR "/fixtures/optim_steps.json");
  REQUIRE(in.good());
  return json::parse(in);
}

// |got − want| ≤ rel · max(|want|, floor · max|want|) element by element. A floor is needed
// because an element that came out small by cancellation (β·m + (1 − β)·g with terms of
// opposite sign) carries the rounding of the large terms: float64 is held to 1e-12 with a
// floor of 1e-3 of the tensor's largest element; float32 to 1e-6 of the largest element
// (a norm-wise bound), since PyTorch's vector kernels round in another order than ours
// (mul_ then add_, fused or not) and single-precision results differ in the last bits.
void expect_close(const std::vector<double>& got, const json& want, DType dtype, const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  const double rel = dtype == DType::Float64 ? 1e-12 : 1e-6, floor = dtype == DType::Float64 ? 1e-3 : 1.0;
  double amax = 0;
  for (const auto& w : want) amax = std::max(amax, std::abs(w.get<double>()));
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i].get<double>();
    const double tol = rel * std::max(std::abs(w), floor * amax);
    INFO("element " << i << ": nnlab " << got[i] << " vs PyTorch " << w);
    REQUIRE(std::abs(got[i] - w) <= tol);
  }
}

std::unique_ptr<Optimizer> make(const std::string& kind, const json& o, std::vector<Tensor> params) {
  if (kind == "sgd") {
    SgdOptions s;
    s.lr = o.value("lr", 0.001);
    s.momentum = o.value("momentum", 0.0);
    s.dampening = o.value("dampening", 0.0);
    s.weight_decay = o.value("weight_decay", 0.0);
    s.nesterov = o.value("nesterov", false);
    return std::make_unique<SGD>(std::move(params), s);
  }
  AdamOptions a;  // PyTorch's defaults, except AdamW's weight decay (given in every case)
  a.lr = o.value("lr", 1e-3);
  if (o.contains("betas")) {
    a.beta1 = o["betas"][0].get<double>();
    a.beta2 = o["betas"][1].get<double>();
  }
  a.eps = o.value("eps", 1e-8);
  a.weight_decay = o.value("weight_decay", 0.0);
  if (kind == "adam") return std::make_unique<Adam>(std::move(params), a);
  return std::make_unique<AdamW>(std::move(params), a);
}

Tensor param_from(const json& values, const json& shape, DType dtype) {
  const Tensor t64 = Tensor::from_vector(values.get<std::vector<double>>(), shape.get<Shape>());
  Tensor p = dtype == DType::Float64 ? t64 : t64.to(dtype);
  p.set_requires_grad(true);
  return p;
}

void run_case(const json& fx, const json& c) {
  const DType dtype = c["dtype"] == "float64" ? DType::Float64 : DType::Float32;
  const std::string label = c["name"].get<std::string>() + " " + c["dtype"].get<std::string>();
  std::vector<Tensor> params;
  for (size_t k = 0; k < fx["shapes"].size(); ++k)
    params.push_back(param_from(fx["initial"][k], fx["shapes"][k], dtype));
  auto opt = make(c["optimizer"], c["options"], params);

  for (size_t s = 0; s < c["trajectory"].size(); ++s) {
    opt->zero_grad();
    for (size_t k = 0; k < params.size(); ++k) {
      const json& g = fx["grads"][s][k];
      if (!g.is_null()) params[k].set_grad(param_from(g, fx["shapes"][k], dtype).detach());
    }
    opt->step();
    const json& want = c["trajectory"][s];
    std::map<std::string, Tensor> state;
    for (auto& kv : opt->state()) state[kv.first] = kv.second;
    for (size_t k = 0; k < params.size(); ++k) {
      const std::string where = label + " step " + std::to_string(s + 1) + " param " + std::to_string(k);
      expect_close(params[k].to_vector<double>(), want["params"][k], dtype, where);
      for (auto& [key, value] : want["state"][k].items()) {
        const std::string name = std::to_string(k) + "." + key;
        INFO(where << " state " << name);
        if (value.is_null()) {
          CHECK(state.count(name) == 0);
        } else {
          REQUIRE(state.count(name) == 1);
          expect_close(state[name].to_vector<double>(), value, dtype, where + " " + name);
        }
      }
    }
  }
}

void run_family(const std::string& kind) {
  const json fx = load_steps_fixture();
  int cases = 0;
  for (const json& c : fx["cases"]) {
    if (c["optimizer"] != kind) continue;
    SECTION(c["name"].get<std::string>() + " " + c["dtype"].get<std::string>()) { run_case(fx, c); }
    ++cases;
  }
  REQUIRE(cases >= 4);
}

}  // namespace

TEST_CASE("SGD matches PyTorch: plain, momentum, dampening, nesterov, weight decay", "[optim]") { run_family("sgd"); }

TEST_CASE("Adam matches PyTorch: defaults, weight decay, betas and eps", "[optim]") { run_family("adam"); }

TEST_CASE("AdamW matches PyTorch with decoupled weight decay", "[optim]") { run_family("adamw"); }

TEST_CASE("a parameter without a gradient is left alone, state and step count included", "[optim]") {
  Tensor a = Tensor::from_vector<double>({1.0, 2.0}, {2}).set_requires_grad(true);
  Tensor b = Tensor::from_vector<double>({3.0}, {1}).set_requires_grad(true);
  Adam opt({a, b}, AdamOptions{});
  a.set_grad(Tensor::from_vector<double>({0.5, -0.5}, {2}));
  b.set_grad(Tensor::from_vector<double>({1.0}, {1}));
  opt.step();
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  const std::vector<double> b_after_one = b.to_vector<double>();
  CHECK(b_after_one[0] != 3.0);
  a.set_grad(Tensor::from_vector<double>({0.5, -0.5}, {2}));
  opt.step();  // b has no gradient: untouched
  CHECK(b.to_vector<double>() == b_after_one);
  b.set_grad(Tensor::from_vector<double>({4.0}, {1}));
  opt.step();  // b's own second step: the bias correction uses t = 2, not 3
  const double m = 0.1 * 1.0 * 0.9 + 0.1 * 4.0, v = 0.001 * 1.0 * 0.999 + 0.001 * 16.0;
  const double expected = b_after_one[0] - 1e-3 / (1 - 0.81) * m / (std::sqrt(v) / std::sqrt(1 - 0.998001) + 1e-8);
  CHECK(b.to_vector<double>()[0] == Approx(expected).epsilon(1e-12));
}

TEST_CASE("bad optimizer hyper-parameters are rejected with a message", "[optim]") {
  Tensor p = Tensor::zeros({3}, DType::Float32).set_requires_grad(true);
  SgdOptions neg_lr;
  neg_lr.lr = -0.1;
  CHECK_THROWS_WITH(SGD({p}, neg_lr), Catch::Contains("SGD") && Catch::Contains("non-negative"));
  SgdOptions nesterov;
  nesterov.nesterov = true;
  CHECK_THROWS_WITH(SGD({p}, nesterov), Catch::Contains("Nesterov"));
  AdamOptions beta;
  beta.beta1 = 1.0;
  CHECK_THROWS_WITH(Adam({p}, beta), Catch::Contains("betas") && Catch::Contains("[0, 1)"));
  AdamOptions eps;
  eps.eps = -1e-8;
  CHECK_THROWS_WITH(AdamW({p}, eps), Catch::Contains("eps"));
  Tensor no_grad = Tensor::zeros({3}, DType::Float32);
  CHECK_THROWS_WITH(SGD({no_grad}, SgdOptions{}), Catch::Contains("requires a gradient"));
}

TEST_CASE("a one-cycle schedule drives SGD's momentum and Adam's beta1", "[optim][schedule]") {
  Tensor p = Tensor::zeros({2}, DType::Float64).set_requires_grad(true);
  SgdOptions so;
  so.momentum = 0.9;
  SGD sgd({p}, so);
  Adam adam({p}, AdamOptions{});
  OneCycleLR sched(OneCycleOptions{}, 20);
  sched.apply(sgd, 3);
  sched.apply(adam, 3);
  CHECK(sgd.lr() == sched.lr_at(3));
  CHECK(sgd.momentum() == sched.momentum_at(3));
  CHECK(adam.momentum() == sched.momentum_at(3));
  CHECK(sgd.momentum() < 0.95);
  // A schedule that does not cycle momentum leaves it alone.
  CosineAnnealingLR cos(0.1, 10, 0.0);
  cos.apply(sgd, 5);
  CHECK(sgd.momentum() == sched.momentum_at(3));
  CHECK(sgd.lr() == Approx(0.05).epsilon(1e-12));
}

// SGD steps all of a device's parameters in one call (Backend::sgd_step_all; on the CPU one
// parallel region, each thread over its share of every tensor): tensors over the parallel grain
// beside small ones and one without a gradient, against the update rule element by element.
TEST_CASE("SGD's one-pass step over all parameters follows the rule on every element", "[optim]") {
  for (bool nesterov : {false, true}) {
    INFO("nesterov " << nesterov);
    const int64_t big = 50001;  // odd: the threads' shares end off a 16-element boundary
    std::vector<Tensor> params = {Tensor::full({big}, 1.0f), Tensor::full({3}, -2.0f), Tensor::full({big}, 0.5f)};
    for (Tensor& p : params) p.set_requires_grad(true);
    SgdOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.weight_decay = 0.01;
    o.nesterov = nesterov;
    SGD sgd(params, o);
    std::vector<std::vector<double>> want, buf(3);
    for (const Tensor& p : params) want.push_back(p.to(DType::Float64).to_vector<double>());
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < params.size(); ++i) {
        if (i == 1 && step == 1) continue;  // no gradient this step: left alone
        std::vector<float> g(params[i].numel());
        for (size_t e = 0; e < g.size(); ++e) g[e] = 0.001f * float((e * 7 + i + step) % 13) - 0.006f;
        params[i].set_grad(Tensor::from_vector(g, params[i].shape()));
        for (size_t e = 0; e < g.size(); ++e) {
          const double gi = double(g[e]) + 0.01 * want[i][e];
          if (buf[i].empty()) buf[i].assign(g.size(), 0.0);
          buf[i][e] = step == 0 ? gi : 0.9 * buf[i][e] + gi;
          want[i][e] -= 0.1 * (nesterov ? gi + 0.9 * buf[i][e] : buf[i][e]);
        }
      }
      sgd.step();
      sgd.zero_grad();
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> got = params[i].to_vector<float>();
      for (size_t e = 0; e < got.size(); ++e) {
        INFO("parameter " << i << " element " << e);
        REQUIRE(got[e] == Approx(want[i][e]).epsilon(1e-5));
      }
    }
  }
}

// SGD's checked step (step_checked: Backend::sgd_step_all with check_grad; the CPU checks and
// updates in one parallel region): the first non-finite gradient in parameter order raises the
// skip flag with its mark, even when a later parameter's fault sits in the first thread's share
// and this one's in the second's, and then no parameter moves; with all gradients finite it is
// step() to the bit.
TEST_CASE("SGD's checked step raises the first bad gradient's mark and moves nothing", "[optim]") {
  const int64_t big = 50001;  // over the parallel grain: both threads take a share
  for (int threads : {1, 2}) {
    INFO(threads << " thread(s)");
    set_cpu_threads(threads);
    const auto make = [&] {
      std::vector<Tensor> params = {Tensor::full({big}, 1.0f), Tensor::full({3}, -2.0f), Tensor::full({big}, 0.5f)};
      for (Tensor& p : params) p.set_requires_grad(true);
      return params;
    };
    const auto gradients = [&](std::vector<Tensor>& params) {
      for (size_t i = 0; i < params.size(); ++i) {
        std::vector<float> g(static_cast<size_t>(params[i].numel()));
        for (size_t e = 0; e < g.size(); ++e) g[e] = 0.001f * float((e * 7 + i) % 13) - 0.006f;
        params[i].set_grad(Tensor::from_vector(g, params[i].shape()));
      }
    };
    const std::vector<NonFiniteMark> marks = {{3, 1}, {3, 2}, {3, 3}};
    SgdOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    // All finite: the same bits as step().
    std::vector<Tensor> plain = make(), checked = make();
    SGD plain_sgd(plain, o), checked_sgd(checked, o);
    Tensor plain_flag = make_nonfinite_flag(Device::cpu()), flag = make_nonfinite_flag(Device::cpu());
    plain_sgd.set_skip_flag(plain_flag);
    checked_sgd.set_skip_flag(flag);
    for (int step = 0; step < 2; ++step) {
      gradients(plain);
      gradients(checked);
      plain_sgd.step();
      checked_sgd.step_checked(marks);
    }
    CHECK(read_nonfinite_flag(flag).step == 0);
    for (size_t i = 0; i < plain.size(); ++i) CHECK(checked[i].to_vector<float>() == plain[i].to_vector<float>());
    // A NaN in the second thread's share of the first parameter, an inf in the first thread's
    // share of the last: the first parameter's mark, and nothing moves.
    std::vector<std::vector<float>> before;
    for (const Tensor& p : checked) before.push_back(p.to_vector<float>());
    gradients(checked);
    checked[0].grad().data<float>()[big - 1] = std::nanf("");
    checked[2].grad().data<float>()[0] = std::numeric_limits<float>::infinity();
    checked_sgd.step_checked(marks);
    CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{3, 1});
    for (size_t i = 0; i < checked.size(); ++i) CHECK(checked[i].to_vector<float>() == before[i]);
    // Raised, it stays: a finite step later moves nothing and keeps the first mark.
    gradients(checked);
    checked_sgd.step_checked({{4, 1}, {4, 2}, {4, 3}});
    CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{3, 1});
    for (size_t i = 0; i < checked.size(); ++i) CHECK(checked[i].to_vector<float>() == before[i]);
    CHECK_THROWS_WITH(checked_sgd.step_checked({{4, 1}}), Catch::Contains("1 marks for 3 parameters"));
  }
  set_cpu_threads(0);
}
