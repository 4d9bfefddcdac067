// What a CUDA graph's kernels read from device memory instead of kernel arguments (a replay
// repeats its arguments): the batch's place in the epoch, the optimizer's numbers of the step,
// the step's number for the non-finite mark. Each against its CPU twin or the by-argument
// launch, bit for bit.
#include "gpu/gpu_support.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "optim/schedule.h"

using namespace nnlab;
using namespace nnlab::gputest;

// The gathers a CUDA graph records: the batch's place in the epoch read on the device. Batch
// 2 of batches of 3 from an order of 9, CPU and CUDA twins bit for bit; a position past the
// order's end gathers nothing and says so (CPU at once, CUDA at the next read-back).
TEST_CASE("gpu: gathers at a position read on the device match the CPU", "[gpu][memory]") {
  const Tensor rows = fresh_tensor({6, 3, 4, 5}, 0.0, 1.0);
  const Tensor order = Tensor::from_vector(std::vector<int32_t>{5, 1, 0, 3, 3, 2, 4, 0, 1}, {9});
  std::vector<int32_t> shift_values;
  for (int i = 0; i < 9; ++i) shift_values.insert(shift_values.end(), {i % 3 - 1, 2 - i % 5, i % 2});
  const Tensor shifts = Tensor::from_vector(shift_values, {9, 3});
  const Tensor mean_std = Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 3.0f, 0.3f, 1.5f, 0.9f}, {2, 3});
  const Tensor position = Tensor::full({}, 2.0, DType::Int32);
  Tensor want = Tensor::empty({3, 3, 4, 5}), got = on_gpu(Tensor::empty({3, 3, 4, 5}));
  cpu().gather_rows_at(rows, order, position, want);
  gpu().gather_rows_at(on_gpu(rows), on_gpu(order), on_gpu(position), got);
  require_equal<float>(got, want, "gather_rows_at");
  Tensor by_offset = Tensor::empty({3, 3, 4, 5});
  cpu().gather_rows(rows, order.rows(6, 9), by_offset);
  require_equal<float>(want, by_offset, "gather_rows_at against gather_rows of order[6:9]");
  cpu().gather_images_at(rows, order, shifts, position, mean_std, want);
  gpu().gather_images_at(on_gpu(rows), on_gpu(order), on_gpu(shifts), on_gpu(position), on_gpu(mean_std), got);
  require_equal<float>(got, want, "gather_images_at");
  Tensor by_index = Tensor::empty({3, 3, 4, 5});
  cpu().gather_images(rows, order.rows(6, 9), shifts.rows(6, 9), mean_std, by_index);
  require_equal<float>(want, by_index, "gather_images_at against gather_images of order[6:9]");
  const Tensor past = Tensor::full({}, 3.0, DType::Int32);
  CHECK_THROWS_WITH(cpu().gather_rows_at(rows, order, past, want), Catch::Contains("outside an order of 9"));
  gpu().gather_rows_at(on_gpu(rows), on_gpu(order), on_gpu(past), got);
  CHECK_THROWS_WITH(got.to_vector<float>(), Catch::Contains("gather_rows"));
}

// SGD with momentum and Adam with decoupled decay, their per-step numbers read on the device
// (SgdParams/AdamParams::on_device, laid out as Optimizer::stage_recorded_step's rows hold them):
// the same bits as the same numbers passed as arguments, and as the CPU's step.
TEST_CASE("gpu: optimizer numbers read on the device give the by-argument update", "[gpu][optim]") {
  const std::vector<int64_t> sizes{70000, 33, 1};
  std::vector<Tensor> p, buf, g;
  for (int64_t n : sizes) p.push_back(fresh_tensor({n})), buf.push_back(fresh_tensor({n})), g.push_back(fresh_tensor({n}));
  {
    const SgdParams hp{0.05, 0.85, 0.0, 1e-3, true};
    std::vector<Tensor> a, abuf, b, bbuf, gg;
    std::vector<SgdSlot> by_argument, by_device;
    for (size_t i = 0; i < p.size(); ++i) {
      a.push_back(on_gpu(p[i])), abuf.push_back(on_gpu(buf[i])), b.push_back(on_gpu(p[i]));
      bbuf.push_back(on_gpu(buf[i])), gg.push_back(on_gpu(g[i]));
    }
    for (size_t i = 0; i < p.size(); ++i) {
      by_argument.push_back(SgdSlot{&a[i], &gg[i], &abuf[i], false});
      by_device.push_back(SgdSlot{&b[i], &gg[i], &bbuf[i], false});
    }
    gpu().sgd_step_all(by_argument, hp, nullptr);
    const Tensor numbers = on_gpu(Tensor::from_vector(
        std::vector<float>{static_cast<float>(hp.lr), static_cast<float>(hp.momentum)}, {2}));
    SgdParams read = hp;
    read.lr = read.momentum = -1.0;  // must not be used
    read.on_device = &numbers;
    gpu().sgd_step_all(by_device, read, nullptr);
    for (size_t i = 0; i < p.size(); ++i) {
      cpu().sgd_step(p[i], g[i], buf[i], hp, false, nullptr);
      require_equal<float>(b[i], a[i], "SGD, numbers on the device against arguments");
      require_equal<float>(bbuf[i], abuf[i], "SGD momentum buffer");
      require_allclose(b[i], p[i], 1e-6, 1e-7, "SGD, numbers on the device against the CPU");
    }
    CHECK_THROWS_WITH(cpu().sgd_step_all({SgdSlot{&p[0], &g[0], &buf[0], false}}, read, nullptr),
                      Catch::Contains("numbers read on the device are for CUDA graphs"));
  }
  {
    const AdamParams hp{2e-3, 0.93, 0.999, 1e-8, 1e-2, true};
    std::vector<Tensor> a, am, av, b, bm, bv, gg;
    std::vector<AdamSlot> by_argument, by_device;
    std::vector<float> numbers{static_cast<float>(1.0 - hp.lr * hp.weight_decay), static_cast<float>(hp.beta1),
                               static_cast<float>(1.0 - hp.beta1)};
    for (size_t i = 0; i < p.size(); ++i) {
      const Tensor m = fresh_tensor(p[i].shape()), v = fresh_tensor(p[i].shape(), 0.0, 1.0);
      a.push_back(on_gpu(p[i])), am.push_back(on_gpu(m)), av.push_back(on_gpu(v));
      b.push_back(on_gpu(p[i])), bm.push_back(on_gpu(m)), bv.push_back(on_gpu(v)), gg.push_back(on_gpu(g[i]));
      const AdamCorrections c = adam_corrections(hp, 4 + static_cast<int64_t>(i));
      numbers.push_back(static_cast<float>(c.step_size));
      numbers.push_back(static_cast<float>(c.bc2_sqrt));
    }
    for (size_t i = 0; i < p.size(); ++i) {
      by_argument.push_back(AdamSlot{&a[i], &gg[i], &am[i], &av[i], 4 + static_cast<int64_t>(i)});
      by_device.push_back(AdamSlot{&b[i], &gg[i], &bm[i], &bv[i], 1});  // the step is read on the device
    }
    gpu().adam_step_all(by_argument, hp, nullptr);
    const Tensor on_device = on_gpu(Tensor::from_vector(numbers, {static_cast<int64_t>(numbers.size())}));
    AdamParams read = hp;
    read.lr = read.beta1 = 0.5;  // must not be used
    read.on_device = &on_device;
    gpu().adam_step_all(by_device, read, nullptr);
    for (size_t i = 0; i < p.size(); ++i) {
      require_equal<float>(b[i], a[i], "Adam, numbers on the device against arguments");
      require_equal<float>(bv[i], av[i], "Adam exp_avg_sq");
    }
    const Tensor too_few = on_gpu(Tensor::zeros({4}));
    read.on_device = &too_few;
    CHECK_THROWS_WITH(gpu().adam_step_all(by_device, read, nullptr), Catch::Contains("numbers read on the device"));
  }
}

// The non-finite mark's step read on the device: the CPU and CUDA checks record the count's
// value, not the marks' step.
TEST_CASE("gpu: a finiteness check names the step number held on the device", "[gpu][optim]") {
  Tensor a = fresh_tensor({1000}), b = fresh_tensor({10});
  b.data<float>()[3] = std::nanf("");
  const Tensor step = Tensor::full({}, 41.0, DType::Int32);
  Tensor cpu_flag = Tensor::zeros({2}, DType::Int32), gpu_flag = on_gpu(Tensor::zeros({2}, DType::Int32));
  cpu().check_finite_all({a, b}, cpu_flag, {{1, 1}, {1, 2}}, &step);
  const Tensor gpu_step = on_gpu(step);
  gpu().check_finite_all({on_gpu(a), on_gpu(b)}, gpu_flag, {{1, 1}, {1, 2}}, &gpu_step);
  CHECK(cpu_flag.to_vector<int32_t>() == std::vector<int32_t>{41, 2});
  CHECK(gpu_flag.to_vector<int32_t>() == std::vector<int32_t>{41, 2});
  const Tensor wrong = Tensor::full({2}, 1.0, DType::Int32);
  CHECK_THROWS_WITH(cpu().check_finite_all({a}, cpu_flag, {{1, 1}}, &wrong),
                    Catch::Contains("the step number must be one int32"));
}

// The recorded update across windows of its numbers (Optimizer::stage_recorded_step): a
// window of 4 steps, 11 steps under a one-cycle schedule (the lr and the momentum or β1 change
// every step, Adam's corrections too), the gradient new at every step, and step 6 taken
// eagerly in between (the short last batch of an epoch), which must start a new window.
// Every step's parameters equal eager mode's bit for bit.
TEST_CASE("gpu: a recorded update follows eager steps across windows of its numbers", "[gpu][optim][graphs]") {
  const std::vector<int64_t> sizes{5000, 33, 1};
  const int64_t steps = 11, eager_between = 6;
  ScheduleOptions so;
  so.lr = 0.05;
  const std::unique_ptr<LrSchedule> schedule = make_schedule("onecycle", so, steps + 1, steps + 1);
  for (const char* kind : {"sgd", "adamw"}) {
    std::vector<Tensor> eager_params, graph_params, graph_grads;
    for (int64_t n : sizes) {
      const Tensor start = fresh_tensor({n});
      eager_params.push_back(on_gpu(start).set_requires_grad(true));
      graph_params.push_back(on_gpu(start).set_requires_grad(true));
      graph_grads.push_back(on_gpu(Tensor::zeros({n})));
    }
    const auto make = [&](std::vector<Tensor> params) -> std::unique_ptr<Optimizer> {
      if (std::string(kind) == "sgd") return std::make_unique<SGD>(params, SgdOptions{0.05, 0.9, 0.0, 1e-3, true});
      return std::make_unique<AdamW>(params, AdamOptions{0.05, 0.9, 0.999, 1e-8, 0.01});
    };
    std::unique_ptr<Optimizer> eager = make(eager_params), graphed = make(graph_params);
    // This step's gradient, the same values for both; the graph's in the buffers it recorded.
    const auto set_gradients = [&] {
      for (size_t i = 0; i < sizes.size(); ++i) {
        const Tensor g = fresh_tensor({sizes[i]});
        eager_params[i].set_grad(on_gpu(g));
        gpu().copy(on_gpu(g), graph_grads[i]);
        graph_params[i].set_grad(graph_grads[i]);
      }
    };
    const auto eager_step = [&](Optimizer& o, int64_t step) {
      schedule->apply(o, step);
      o.step();
    };
    set_gradients();
    eager_step(*eager, 0), eager_step(*graphed, 0);  // the state exists before the capture
    graphed->prepare_recording(4);
    std::unique_ptr<StepGraph> graph = gpu().capture([&] { graphed->record_step(); });
    for (int64_t step = 1; step <= steps; ++step) {
      set_gradients();
      eager_step(*eager, step);
      if (step == eager_between) {
        eager_step(*graphed, step);
      } else {
        schedule->apply(*graphed, step);
        graphed->stage_recorded_step(schedule.get(), step);
        graph->replay();
      }
      for (size_t i = 0; i < sizes.size(); ++i)
        require_equal<float>(graph_params[i], eager_params[i],
                             std::string(kind) + " step " + std::to_string(step) + " parameter " + std::to_string(i));
    }
    CHECK(graphed->steps_taken() == eager->steps_taken());
  }
}
