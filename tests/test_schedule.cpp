// Learning-rate schedules and gradient clipping against PyTorch 1.13
// (tests/fixtures/optim_schedules.json, written by tests/fixtures/gen_optim.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "optim/clip.h"
#include "optim/schedule.h"

using nlohmann::json;
using namespace nnlab;

namespace {

json load_schedules_fixture() {
  std::ifstream in(NNLAB_TEST_DIR "/fixtures/optim_schedules.json");
  REQUIRE(in.good());
  return json::parse(in);
}

// Every step s of the fixture: |ours(s) − PyTorch(s)| ≤ 1e-12 · |PyTorch(s)|.
template <typename F>
void expect_sequence(const json& want, F ours, const std::string& what) {
  REQUIRE(want.size() >= 10);
  for (size_t s = 0; s < want.size(); ++s) {
    const double w = want[s].get<double>(), got = ours(static_cast<int64_t>(s));
    INFO(what << " step " << s << ": nnlab " << got << " vs PyTorch " << w);
    REQUIRE(std::abs(got - w) <= 1e-12 * std::abs(w));
  }
}

OneCycleOptions onecycle_from(const json& f) {
  OneCycleOptions o;
  o.max_lr = f["max_lr"];
  o.pct_start = f["pct_start"];
  o.div_factor = f["div_factor"];
  o.final_div_factor = f["final_div_factor"];
  o.base_momentum = f["base_momentum"];
  o.max_momentum = f["max_momentum"];
  return o;
}

}  // namespace

TEST_CASE("StepLR and CosineAnnealingLR match PyTorch", "[schedule]") {
  const json fx = load_schedules_fixture()["schedules"];
  const json& st = fx["step"];
  StepLR step(st["base_lr"], st["step_size"], st["gamma"]);
  expect_sequence(st["lr"], [&](int64_t s) { return step.lr_at(s); }, "step");
  CHECK(std::isnan(step.momentum_at(0)));

  // Past T_max PyTorch's cosine climbs again; the fixture runs 16 steps with T_max = 10.
  const json& co = fx["cosine"];
  CosineAnnealingLR cosine(co["base_lr"], co["t_max"], co["eta_min"]);
  expect_sequence(co["lr"], [&](int64_t s) { return cosine.lr_at(s); }, "cosine");
}

TEST_CASE("linear warm-up then cosine matches PyTorch's LinearLR + SequentialLR", "[schedule]") {
  const json f = load_schedules_fixture()["schedules"]["warmup_cosine"];
  const int64_t warmup = f["warmup_steps"], total = f["total_steps"];
  LinearWarmup direct(f["start_factor"], warmup,
                      std::make_unique<CosineAnnealingLR>(f["base_lr"], total - warmup, f["eta_min"]));
  expect_sequence(f["lr"], [&](int64_t s) { return direct.lr_at(s); }, "warmup-cosine");

  ScheduleOptions o;
  o.lr = f["base_lr"];
  o.min_lr = f["eta_min"];
  o.warmup_steps = warmup;
  o.warmup_start_factor = f["start_factor"];
  auto made = make_schedule("warmup-cosine", o, total, 7);
  expect_sequence(f["lr"], [&](int64_t s) { return made->lr_at(s); }, "make_schedule(warmup-cosine)");
}

TEST_CASE("OneCycleLR matches PyTorch: lr and momentum / beta1", "[schedule]") {
  const json fx = load_schedules_fixture()["schedules"];
  for (const char* key : {"onecycle_sgd", "onecycle_adam"}) {
    const json& f = fx[key];
    OneCycleLR sched(onecycle_from(f), f["total_steps"]);
    expect_sequence(f["lr"], [&](int64_t s) { return sched.lr_at(s); }, std::string(key) + " lr");
    expect_sequence(f["momentum"], [&](int64_t s) { return sched.momentum_at(s); }, std::string(key) + " momentum");
  }
  OneCycleOptions no_cycle = onecycle_from(fx["onecycle_sgd"]);
  no_cycle.cycle_momentum = false;
  CHECK(std::isnan(OneCycleLR(no_cycle, 20).momentum_at(4)));
}

TEST_CASE("make_schedule counts StepLR in epochs and the others in steps", "[schedule]") {
  const json st = load_schedules_fixture()["schedules"]["step"];
  ScheduleOptions o;
  o.lr = st["base_lr"];
  o.step_epochs = st["step_size"];
  o.gamma = st["gamma"];
  const int64_t per_epoch = 4;
  auto step = make_schedule("step", o, 12 * per_epoch, per_epoch);
  // PyTorch's StepLR stepped once per epoch: every step of epoch e uses the lr of epoch e.
  expect_sequence(st["lr"], [&](int64_t e) { return step->lr_at(e * per_epoch); }, "step/epochs, first step");
  expect_sequence(st["lr"], [&](int64_t e) { return step->lr_at(e * per_epoch + per_epoch - 1); }, "step/epochs, last");

  o.lr = 0.2;
  auto none = make_schedule("none", o, 10, 5);
  CHECK(none->lr_at(0) == 0.2);
  CHECK(none->lr_at(9) == 0.2);
  auto cosine = make_schedule("cosine", o, 100, 10);
  CHECK(cosine->lr_at(0) == 0.2);
  CHECK(cosine->lr_at(50) == Approx(0.1).epsilon(1e-12));  // halfway through all 100 steps
  auto onecycle = make_schedule("onecycle", o, 100, 10);
  CHECK(onecycle->lr_at(29) == Approx(0.2).epsilon(1e-12));  // the peak is --lr, at pct_start·N − 1
  CHECK(onecycle->momentum_at(29) == Approx(0.85).epsilon(1e-12));
  // warm-up 0 means one epoch
  auto warm = make_schedule("warmup-cosine", o, 100, 10);
  CHECK(warm->lr_at(10) == Approx(0.2).epsilon(1e-12));
  CHECK(warm->lr_at(9) < 0.2);
}

TEST_CASE("bad schedule options are rejected with a message", "[schedule]") {
  ScheduleOptions o;
  CHECK_THROWS_WITH(make_schedule("linear", o, 10, 5), Catch::Contains("unknown schedule 'linear'") &&
                                                           Catch::Contains("warmup-cosine"));
  CHECK_THROWS_WITH(make_schedule("cosine", o, 0, 5), Catch::Contains("at least one step"));
  ScheduleOptions gamma = o;
  gamma.gamma = 0;
  CHECK_THROWS_WITH(make_schedule("step", gamma, 10, 5), Catch::Contains("gamma"));
  ScheduleOptions min_lr = o;
  min_lr.min_lr = 1.0;
  CHECK_THROWS_WITH(make_schedule("cosine", min_lr, 10, 5), Catch::Contains("minimum lr"));
  ScheduleOptions warm = o;
  warm.warmup_steps = 10;
  CHECK_THROWS_WITH(make_schedule("warmup-cosine", warm, 10, 5), Catch::Contains("warm-up of 10 steps"));
  ScheduleOptions factor = o;
  factor.warmup_start_factor = 0;
  CHECK_THROWS_WITH(make_schedule("warmup-cosine", factor, 10, 5), Catch::Contains("start factor"));
  ScheduleOptions pct = o;
  pct.onecycle.pct_start = 0.05;  // 0.05 · 20 − 1 = 0: an empty warm-up phase
  CHECK_THROWS_WITH(make_schedule("onecycle", pct, 20, 5), Catch::Contains("empty warm-up"));
  ScheduleOptions mom = o;
  mom.onecycle.base_momentum = 0.99;
  CHECK_THROWS_WITH(make_schedule("onecycle", mom, 20, 5), Catch::Contains("base_momentum <= max_momentum"));
  auto onecycle = make_schedule("onecycle", o, 20, 5);
  CHECK_THROWS_WITH(onecycle->lr_at(21), Catch::Contains("past the 20 steps"));
}

TEST_CASE("clip_grad_norm matches torch.nn.utils.clip_grad_norm_", "[optim][clip]") {
  const json cases = load_schedules_fixture()["clip"];
  REQUIRE(cases.size() >= 6);
  for (const json& c : cases) {
    const DType dtype = c["dtype"] == "float64" ? DType::Float64 : DType::Float32;
    const double rel = dtype == DType::Float64 ? 1e-12 : 1e-6;
    INFO(c["name"].get<std::string>() << " " << c["dtype"].get<std::string>());
    std::vector<Tensor> params;
    for (const json& g : c["grads"]) {
      const auto values = g.get<std::vector<double>>();
      const Shape shape{static_cast<int64_t>(values.size())};
      Tensor p = Tensor::zeros(shape, dtype).set_requires_grad(true);
      p.set_grad(Tensor::from_vector(values, shape).to(dtype));
      params.push_back(p);
    }
    params.push_back(Tensor::zeros({3}, dtype).set_requires_grad(true));  // no gradient: ignored
    const double total = clip_grad_norm(params, c["max_norm"]);
    CHECK(std::abs(total - c["total_norm"].get<double>()) <= rel * c["total_norm"].get<double>());
    for (size_t k = 0; k < c["clipped"].size(); ++k) {
      const auto got = params[k].grad().to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i) {
        const double w = c["clipped"][k][i];
        INFO("grad " << k << " element " << i << ": nnlab " << got[i] << " vs PyTorch " << w);
        CHECK(std::abs(got[i] - w) <= rel * std::max(std::abs(w), 1e-3));
      }
    }
    CHECK_FALSE(params.back().grad().defined());
  }
}

TEST_CASE("clip_grad_norm: no gradients, bad max_norm", "[optim][clip]") {
  Tensor p = Tensor::zeros({2}, DType::Float32).set_requires_grad(true);
  CHECK(clip_grad_norm({p}, 1.0) == 0.0);
  p.set_grad(Tensor::from_vector<float>({3.0f, 4.0f}, {2}));
  CHECK_THROWS_WITH(clip_grad_norm({p}, 0.0), Catch::Contains("max_norm must be a positive"));
  CHECK(clip_grad_norm({p}, 10.0) == Approx(5.0));
  CHECK(p.grad().to_vector<float>() == std::vector<float>{3.0f, 4.0f});  // under the limit: untouched
}
