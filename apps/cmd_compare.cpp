// nnlab compare: the identical training on two (or more) run variants, one after the other —
// same seed, same initial weights (drawn on the host, then copied), same batches (shuffled
// on the host), same dropout masks (Philox draws compared as integers) — and how they
// differ: time per phase, images/s, speed-up, test accuracy, and how far the two runs drift
// apart (loss at every step, final weights per tensor). The first variant is the baseline.
//
// The loop is the Trainer's (apps/trainer.cpp) minus checkpoints and progress, plus one
// read-back of the loss per step, so each step's loss can be compared; that read-back is
// timed in the optimizer phase on every variant alike.
#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/compare_report.h"
#include "apps/environment.h"
#include "apps/report_html.h"
#include "apps/run_variant.h"
#include "apps/trainer.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "optim/clip.h"

namespace nnlab {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct CompareData {
  Dataset train, test;
  Normalization normalization;
};

double test_accuracy(Sequential& model, const CompareData& data, Device device) {
  NoGradGuard no_grad;
  model.eval();
  Tensor correct = Tensor::zeros({}, DType::Int32, device);
  DataLoaderOptions opts;
  opts.batch_size = 1000;
  opts.shuffle = false;
  opts.device = device;
  opts.normalize = data.normalization;
  DataLoader loader(data.test, opts);
  loader.start_epoch(0);
  Batch batch;
  while (loader.next(batch)) accumulate_correct(model.forward(batch.images), batch.labels, correct);
  model.train();
  return data.test.size() ? correct.item() / static_cast<double>(data.test.size()) : 0.0;
}

// One epoch of the loop; appends each step's loss.
void run_epoch(const TrainConfig& c, int64_t epoch, Sequential& model, Optimizer& opt, DataLoader& loader,
               LrSchedule& schedule, int64_t& global_step, VariantRun& run) {
  model.train();
  loader.start_epoch(epoch);
  Batch batch;
  for (;;) {
    if (c.max_steps > 0 && global_step >= c.max_steps) break;
    auto t = Clock::now();
    if (!loader.next(batch)) break;
    run.phases.data += seconds_since(t);
    t = Clock::now();
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(batch.images), batch.labels);
    run.phases.forward += seconds_since(t);
    t = Clock::now();
    loss.backward();
    run.phases.backward += seconds_since(t);
    t = Clock::now();
    if (c.clip_grad_norm > 0) clip_grad_norm(opt.params(), c.clip_grad_norm);
    schedule.apply(opt, global_step);
    opt.step();
    run.step_loss.push_back(loss.item());  // waits for the device: the step is done
    run.phases.optimizer += seconds_since(t);
    run.images += batch.images.dim(0);
    ++global_step;
  }
}

VariantRun run_variant(const TrainConfig& c, const RunVariant& v, const CompareData& data) {
  VariantRun run;
  run.label = v.label;
  const Device device = apply_variant(v);
  run.device = device_label(device);
  run.threads = cpu_threads();
  run.conv = conv_impl_name(v.conv);
  const InputSpec input{data.train.channels(), data.train.height(), data.train.width(), data.train.classes};
  auto model = make_model(c.model_spec, input, c.seed);  // drawn on the host: the same bits on every device
  model->to(device);
  auto opt = make_optimizer(c.optimizer, model->parameters());
  DataLoaderOptions opts;
  opts.batch_size = c.batch;
  opts.seed = c.seed;
  opts.device = device;
  opts.normalize = data.normalization;
  opts.augment = Augmentation{c.crop_padding, c.hflip};
  DataLoader loader(data.train, opts);
  ScheduleOptions sched = c.schedule_options;
  sched.lr = c.optimizer.lr;
  auto schedule = make_schedule(c.schedule, sched, c.epochs * loader.steps_per_epoch(), loader.steps_per_epoch());
  int64_t global_step = 0;
  const auto t0 = Clock::now();
  for (int64_t e = 1; e <= c.epochs && !(c.max_steps > 0 && global_step >= c.max_steps); ++e) {
    run_epoch(c, e, *model, *opt, loader, *schedule, global_step, run);
    run.epochs = e;
  }
  run.seconds = seconds_since(t0);
  run.images_per_second = static_cast<double>(run.images) / run.seconds;
  run.test_accuracy = test_accuracy(*model, data, device);
  for (const auto& [name, t] : model->named_parameters()) run.weights.emplace_back(name, t.to(Device::cpu()));
  std::printf("%-24s %lld steps in %.2f s, %.0f img/s, test accuracy %.2f%%\n", v.label.c_str(),
              static_cast<long long>(run.step_loss.size()), run.seconds, run.images_per_second,
              100.0 * run.test_accuracy);
  std::fflush(stdout);
  return run;
}

// ||a − b||₂ / ||a||₂ over one tensor (float32 on the host), in double.
double relative_l2(const Tensor& a, const Tensor& b) {
  const float *x = a.data<float>(), *y = b.data<float>();
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(x[i]) * x[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

Drift drift_between(const VariantRun& a, const VariantRun& b) {
  Drift d;
  for (size_t i = 0; i < a.step_loss.size() && i < b.step_loss.size(); ++i) {
    const double diff = std::fabs(a.step_loss[i] - b.step_loss[i]);
    d.loss_diff.push_back(diff);
    if (diff > d.max_loss_diff) d.max_loss_diff = diff, d.max_loss_step = int64_t(i) + 1;
  }
  for (size_t i = 0; i < a.weights.size() && i < b.weights.size(); ++i)
    d.weight_rel_l2.emplace_back(a.weights[i].first, relative_l2(a.weights[i].second, b.weights[i].second));
  return d;
}

CompareData load_compare_data(const TrainConfig& c, int64_t test_images) {
  CompareData d;
  d.train = load_dataset(c.data, c.data_dir, "train");
  d.test = load_dataset(c.data, c.data_dir, "test");
  if (test_images > 0 && test_images < d.test.size()) {
    d.test.images = d.test.images.rows(0, test_images);
    d.test.labels = d.test.labels.rows(0, test_images);
  }
  if (c.normalize == "dataset") d.normalization = channel_statistics(d.train);
  return d;
}

}  // namespace

void register_compare_command(CLI::App& app) {
  auto config = std::make_shared<TrainConfig>();
  auto devices = std::make_shared<std::string>();
  auto conv = std::make_shared<std::string>("auto");
  auto report = std::make_shared<std::string>();
  auto test_images = std::make_shared<int64_t>(0);
  CLI::App* sub = app.add_subcommand("compare", "The identical training on two devices (or CPU variants), side by side");
  add_train_options(*sub, *config);
  sub->add_option("--devices", *devices,
                  "Run variants, comma-separated, the first is the baseline: DEVICE[:threads=N][:conv=auto|reference|"
                  "im2col|cudnn][:math=fp32|tf32], e.g. cpu,cuda or cpu:threads=1,cpu:threads=2")
      ->required();
  sub->add_option("--conv-impl", *conv,
                  "Convolution for every variant that names none: auto, reference, im2col (CPU) or cudnn (CUDA)")
      ->capture_default_str();
  sub->add_option("--report", *report, "Write a self-contained HTML report (inline SVG charts) to this file");
  sub->add_option("--test-images", *test_images, "Evaluate on the first N test images (0 = all)")
      ->capture_default_str();
  add_command(sub, [sub, config, devices, conv, report, test_images] {
    TrainConfig& c = *config;
    NNLAB_CHECK(sub->count("--device") == 0, "compare runs every device named by --devices A,B; drop --device");
    NNLAB_CHECK(c.checkpoint_dir.empty() && c.resume.empty() && c.val_split == 0,
                "compare does not take --checkpoint-dir, --resume or --val-split; use nnlab train for those");
    NNLAB_CHECK(*test_images >= 0, "--test-images must be >= 0, got ", *test_images);
    finalize_train_config(*sub, c);
    const std::vector<RunVariant> variants = parse_variants(*devices, c.threads, parse_conv_impl(*conv));
    NNLAB_CHECK(variants.size() >= 2, "--devices needs at least two run variants to compare, got '", *devices,
                "'; e.g. --devices cpu,cuda or --devices cpu:threads=1,cpu:threads=2");
    check_variants(variants);  // an unusable device fails here, before any data is read
    if (!report->empty()) check_writable(*report, "--report");
    if (!c.metrics.empty()) check_writable(c.metrics, "--metrics");
    const CompareData data = load_compare_data(c, *test_images);
    CompareResult result;
    result.config = c;
    for (const RunVariant& v : variants) result.runs.push_back(run_variant(c, v, data));
    for (size_t i = 1; i < result.runs.size(); ++i) result.drift.push_back(drift_between(result.runs[0], result.runs[i]));
    print_compare(result);
    if (!c.metrics.empty()) write_compare_records(result, environment_record(c, Device::cpu()), c.metrics);
    if (!report->empty()) write_text_file(*report, compare_report_html(result));
    return 0;
  });
}

}  // namespace nnlab
