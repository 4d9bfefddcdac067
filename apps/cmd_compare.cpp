// nnlab compare: the identical training on two (or more) run variants, one after the other —
// same seed, same initial weights (drawn on the host, then copied), same batches (shuffled
// on the host), same dropout masks (Philox draws compared as integers) — and how they
// differ: time per phase, images/s, speed-up, test accuracy, and how far the two runs drift
// apart (loss at every step, final weights per tensor). The first variant is the baseline.
//
// Each variant is trained by the Trainer (apps/trainer.cpp), exactly as `nnlab train` runs
// it on that device, so compare's images/s is train's (docs/cli.md, "What the times
// include"). What compare adds: each step's loss copied into a device buffer (one 4-byte
// device copy per step, no wait), read back once per epoch, and the final weights.
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/compare_report.h"
#include "apps/environment.h"
#include "apps/report_html.h"
#include "apps/run_variant.h"
#include "apps/trainer.h"
#include "autograd/ops.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"
#include "layers/precision.h"

namespace nnlab {

namespace {

// One variant trained by the Trainer itself, as `nnlab train` would run it on that device
// (the same step: CUDA graphs, the set on the device, the thread governor), plus the one thing
// compare adds: every step's loss kept on the device and read back once per epoch.
VariantRun run_variant(const TrainConfig& c, const RunVariant& v, int64_t test_images) {
  VariantRun run;
  run.label = v.label;
  const Device device = apply_variant(v);  // checks the variant before anything is loaded
  TrainConfig vc = c;
  vc.device = v.device_text;
  vc.threads = v.threads;
  vc.conv_impl = conv_impl_name(v.conv);
  vc.gemm_impl = gemm_impl_name(v.gemm);
  vc.reduce_impl = reduce_impl_name(v.reduce);
  vc.math = cuda_math_name(v.math);
  vc.precision = precision_of(v, c.precision);
  vc.metrics.clear();
  vc.test_images = test_images;
  Trainer trainer(vc);
  trainer.keep_step_losses();
  trainer.run();
  run.device = device_label(device);
  run.threads = host_cpu::threads();
  run.conv = conv_impl_name(v.conv);
  run.gemm = gemm_impl_name(v.gemm);
  run.reduce = reduce_impl_name(v.reduce);
  run.math = vc.math;
  run.precision = vc.precision;
  for (const EpochResult& e : trainer.epoch_results()) {
    run.phases.data += e.phases.data;
    run.phases.forward += e.phases.forward;
    run.phases.backward += e.phases.backward;
    run.phases.optimizer += e.phases.optimizer;
    run.seconds += e.seconds;
    run.images += static_cast<int64_t>(e.images_per_second * e.seconds + 0.5);
    run.test_accuracy = e.test_accuracy;
    ++run.epochs;
  }
  run.images_per_second = run.seconds > 0 ? static_cast<double>(run.images) / run.seconds : 0.0;
  run.step_loss = trainer.step_losses();
  for (const auto& [name, t] : trainer.model().named_parameters()) run.weights.emplace_back(name, t.to(Device::cpu()));
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
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) {
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

}  // namespace

void register_compare_command(CLI::App& app) {
  auto config = std::make_shared<TrainConfig>();
  auto devices = std::make_shared<std::string>();
  auto conv = std::make_shared<std::string>("auto");
  auto gemm = std::make_shared<std::string>("cublas");
  auto reduce = std::make_shared<std::string>("auto");
  auto report = std::make_shared<std::string>();
  auto test_images = std::make_shared<int64_t>(0);
  CLI::App* sub = app.add_subcommand("compare", "The identical training on two devices (or CPU variants), side by side");
  add_train_options(*sub, *config);
  sub->add_option("--devices", *devices,
                  "Run variants, comma-separated, the first is the baseline: DEVICE[:threads=N][:conv=auto|reference|"
                  "im2col|cudnn][:math=fp32|tf32|bf16][:gemm=...][:reduce=...][:precision=fp32|bf16], e.g. cpu,cuda, "
                  "cpu:threads=1,cpu:threads=2 or cuda,cuda:precision=bf16")
      ->required();
  sub->add_option("--conv-impl", *conv,
                  "Convolution for every variant that names none: auto, reference, im2col (CPU) or cudnn (CUDA)")
      ->capture_default_str();
  sub->add_option("--gemm-impl", *gemm,
                  "GEMM for every variant that names none: cublas, or on CUDA naive, tiled or registers")
      ->capture_default_str();
  sub->add_option("--report", *report, "Write a self-contained HTML report (inline SVG charts) to this file");
  sub->add_option("--test-images", *test_images, "Evaluate on the first N test images (0 = all)")
      ->capture_default_str();
  sub->add_option("--reduce-impl", *reduce, kReduceImplHelp)->capture_default_str();
  add_command(sub, [sub, config, devices, conv, gemm, reduce, report, test_images] {
    TrainConfig& c = *config;
    NNLAB_CHECK(sub->count("--device") == 0, "compare runs every device named by --devices A,B; drop --device");
    NNLAB_CHECK(c.checkpoint_dir.empty() && c.resume.empty() && c.val_split == 0,
                "compare does not take --checkpoint-dir, --resume or --val-split; use nnlab train for those");
    NNLAB_CHECK(*test_images >= 0, "--test-images must be >= 0, got ", *test_images);
    finalize_train_config(*sub, c);
    NNLAB_CHECK(c.math == "fp32", "compare sets the math mode per device (--math ", c.math,
                " would apply to none of them): write it into --devices, e.g. --devices cuda,cuda:math=", c.math);
    const std::vector<RunVariant> variants =
        parse_variants(*devices, c.threads, parse_conv_impl(*conv), parse_gemm_impl(*gemm), parse_reduce_impl(*reduce));
    NNLAB_CHECK(variants.size() >= 2, "--devices needs at least two run variants to compare, got '", *devices,
                "'; e.g. --devices cpu,cuda or --devices cpu:threads=1,cpu:threads=2");
    check_variants(variants);  // an unusable device fails here, before any data is read
    for (const RunVariant& v : variants)  // and a GPU without bf16 tensor cores asked for bf16
      precision_storage_dtype(precision_of(v, c.precision), resolve_device(v.device_text, nullptr), "--precision");
    if (!report->empty()) check_writable(*report, "--report");
    if (!c.metrics.empty()) check_writable(c.metrics, "--metrics");
    CompareResult result;
    result.config = c;
    for (const RunVariant& v : variants) result.runs.push_back(run_variant(c, v, *test_images));
    for (size_t i = 1; i < result.runs.size(); ++i) result.drift.push_back(drift_between(result.runs[0], result.runs[i]));
    print_compare(result);
    if (!c.metrics.empty()) write_compare_records(result, environment_record(c, Device::cpu()), c.metrics);
    if (!report->empty()) write_text_file(*report, compare_report_html(result));
    return 0;
  });
}

}  // namespace nnlab
