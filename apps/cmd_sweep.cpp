// nnlab sweep: the speed-up as a curve, not a number. Steady-state training images/s (a few
// timed steps after warm-up steps, on a synthetic batch: the kernels depend on the shapes,
// not the pixels) on each run variant over batch sizes, model width multipliers and math
// modes, with the crossover batch marked: below it the first variant (the CPU) is faster.
// On a machine without a GPU the second "device" is another CPU thread count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/report_html.h"
#include "apps/run_variant.h"
#include "apps/step_graph.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"
#include "apps/train_config.h"
#include "layers/fuse_epilogues.h"
#include "layers/precision.h"
#include "layers/zoo.h"
#include "optim/make_optimizer.h"

namespace nnlab {

namespace {

using Clock = std::chrono::steady_clock;

struct SweepOptions {
  std::string models = "mlp", model_files, devices, batches = "1,4,16,64,256,1024,4096", widths = "1", maths = "fp32",
              conv = "auto", gemm = "cublas", reduce = "auto", report, metrics;
  int64_t steps = 5, warmup = 2;
  int threads = 0;
  bool zoo_given = false;  // --model was given (with --model-file, both are swept)
  uint64_t seed = 0;
};

struct SweepPoint {
  std::string model, variant, math;
  double width = 1;
  int64_t batch = 0;
  double images_per_second = 0;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

template <typename T>
std::vector<T> parse_numbers(const std::string& text, const char* option, T lo, T hi) {
  std::vector<T> out;
  for (const std::string& item : split_list(text)) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    NNLAB_CHECK(used == item.size() && !item.empty() && v >= double(lo) && v <= double(hi), option, ": '", item,
                "' is not a number in ", lo, "..", hi, " (give a comma-separated list)");
    out.push_back(static_cast<T>(v));
  }
  return out;
}

// Images/s of `steps` training steps after `warmup` untimed ones, on one synthetic batch, in the
// variant's precision (fp32 when it names none). Width w multiplies every hidden width
// (scale_widths); width 1 is the model itself. On CUDA
// the step is train's: forward and backward replayed as one CUDA graph where the model allows
// one (apps/step_graph.h), captured at the second step, the optimizer after it.
double measure(const SweepOptions& o, const ModelFile& info, double width, const RunVariant& v, Device device,
               int64_t batch) {
  const InputSpec in = recipe_input(info, "sweep");
  auto model = make_model(scale_widths(info, width), in, o.seed);
  fuse_epilogues(*model);
  model->to(device);
  model->set_compute_dtype(precision_storage_dtype(precision_of(v), device, "precision"));
  OptimizerConfig oc;
  oc.name = info.recipe.optimizer;
  oc.lr = info.recipe.lr;
  oc.momentum = oc.name == "sgd" ? info.recipe.momentum : 0.0;
  auto opt = make_optimizer(oc, model->parameters());
  Tensor images = Tensor::empty({batch, in.channels, in.height, in.width});
  uniform_fill(images, 0, 1, RandomStream{o.seed, RandomPurpose::Augment, 11});
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = int32_t(i % in.classes);
  images = images.to(device);
  const Tensor label_t = Tensor::from_vector(labels, {batch}).to(device);
  Backend& backend = backend_for(device);
  const bool graphed = device.is_cuda() && graph_obstacle(device, false, false).empty();
  const auto forward_backward = [&] {
    opt->zero_grad();
    cross_entropy(model->forward_for_loss(images), label_t).backward();
  };
  std::unique_ptr<StepGraph> graph;  // its replays write the gradients the optimizer reads
  Clock::time_point t0;
  for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) {
      backend.synchronize();
      t0 = Clock::now();
    }
    if (graphed && s > 0 && !graph) graph = backend.capture(forward_backward);  // the first chose cuDNN's algorithms
    if (graph) graph->replay();
    else forward_backward();
    opt->step();
  }
  backend.synchronize();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  opt->zero_grad();  // the gradients live in the graph's pool, released with it
  return static_cast<double>(batch * o.steps) / seconds;
}

// The smallest batch from which the second variant stays faster than the first (0: never).
int64_t crossover(const std::vector<int64_t>& batches, const std::vector<double>& a, const std::vector<double>& b) {
  int64_t found = 0;
  for (size_t i = batches.size(); i-- > 0;) {
    if (b[i] > a[i]) found = batches[i];
    else break;
  }
  return found;
}

std::string fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Everything a sweep needs, checked before the first measurement.
struct SweepPlan {
  std::vector<ModelFile> models;
  std::vector<std::string> maths;
  std::vector<int64_t> batches;
  std::vector<double> widths;
  std::vector<RunVariant> variants;
};

// What a sweep has produced so far: JSON records, charts and crossover verdicts.
struct SweepOutput {
  nlohmann::json records = nlohmann::json::array();
  std::string charts, summary;
};

SweepPlan plan_sweep(const SweepOptions& o) {
  NNLAB_CHECK(o.steps >= 1 && o.steps <= 1000, "--steps must lie in 1..1000, got ", o.steps);
  NNLAB_CHECK(o.warmup >= 0 && o.warmup <= 100, "--warmup must lie in 0..100, got ", o.warmup);
  SweepPlan plan;
  if (o.model_files.empty() || o.zoo_given)
    for (const std::string& m : split_list(o.models)) plan.models.push_back(model_info(m));
  if (!o.model_files.empty())
    for (const std::string& path : split_list(o.model_files)) plan.models.push_back(read_model_file(path));
  plan.batches = parse_numbers<int64_t>(o.batches, "--batches", 1, 65536);
  plan.widths = parse_numbers<double>(o.widths, "--widths", 0.0625, 16);
  for (const ModelFile& m : plan.models)
    for (double w : plan.widths)  // a model or batch that cannot fit fails now
      check_model(scale_widths(m, w), recipe_input(m, "sweep"), *std::max_element(plan.batches.begin(), plan.batches.end()));
  plan.maths = split_list(o.maths);
  for (const std::string& m : plan.maths)
    parse_cuda_math(m, "--math");
  const std::string list = !o.devices.empty() ? o.devices : cuda_status().usable ? "cpu,cuda" : "cpu:threads=1,cpu";
  plan.variants = parse_variants(list, o.threads, parse_conv_impl(o.conv), parse_gemm_impl(o.gemm),
                                 parse_reduce_impl(o.reduce));
  NNLAB_CHECK(plan.variants.size() == 2, "--devices takes two run variants (the first is the CPU side), got '", list,
              "'");
  check_variants(plan.variants);
  const RunVariant &a = plan.variants[0], &b = plan.variants[1];
  const bool any_cuda = a.device_text.rfind("cuda", 0) == 0 || b.device_text.rfind("cuda", 0) == 0;
  for (const std::string& m : plan.maths)
    NNLAB_CHECK(m == "fp32" || any_cuda || (m == "bf16" && host_cpu::bf16_available()), "--math ", m,
                " is a CUDA math mode", m == "bf16" ? " (or a CPU's with AVX-512 BF16)" : "", ", but neither ", a.label,
                " nor ", b.label, " is a CUDA device; sweep fp32 on this CPU");
  if (!o.report.empty()) check_writable(o.report, "--report");
  if (!o.metrics.empty()) check_writable(o.metrics, "--metrics");
  return plan;
}

// One curve pair: both variants over all batch sizes for one model, width and math mode.
void sweep_group(const SweepOptions& o, const SweepPlan& plan, const ModelFile& info, double width,
                 const std::string& math, SweepOutput& out) {
  const std::string& model = info.name;
  std::vector<double> rate[2];
  for (int vi = 0; vi < 2; ++vi) {
    RunVariant v = plan.variants[vi];
    // The CPU has no tf32, and bf16 products only with AVX-512 BF16: in a row it cannot run,
    // its fp32 rate is the comparison.
    const CudaMath wanted = parse_cuda_math(math, "--math");
    const bool cpu_runs_it = wanted == CudaMath::Fp32 || (wanted == CudaMath::Bf16 && host_cpu::bf16_available());
    v.math = v.device_text.rfind("cuda", 0) == 0 || cpu_runs_it ? wanted : CudaMath::Fp32;
    const Device device = apply_variant(v);
    for (int64_t b : plan.batches) rate[vi].push_back(measure(o, info, width, v, device, b));
  }
  const std::string &a = plan.variants[0].label, &b = plan.variants[1].label;
  for (size_t i = 0; i < plan.batches.size(); ++i) {
    std::printf("%-10s %6g %5s %7lld %16.0f %16.0f %8.2f\n", model.c_str(), width, math.c_str(),
                (long long)plan.batches[i], rate[0][i], rate[1][i], rate[1][i] / rate[0][i]);
    out.records.push_back({{"model", model}, {"width", width}, {"math", math}, {"batch", plan.batches[i]},
                           {a, rate[0][i]}, {b, rate[1][i]}, {"ratio", rate[1][i] / rate[0][i]}});
  }
  const int64_t cross = crossover(plan.batches, rate[0], rate[1]);
  const std::string what = model + " width " + fmt("%g", width) + " " + math;
  const std::string verdict = cross == 0 ? a + " is faster at the largest batch: no crossover"
                              : cross == plan.batches.front()
                                  ? b + " is faster at every batch size"
                                  : a + " wins below batch " + std::to_string(cross) + "; " + b + " from batch " +
                                        std::to_string(cross) + " on";
  std::printf("  crossover (%s): %s\n", what.c_str(), verdict.c_str());
  out.summary += "<li>" + html_escape(what + ": " + verdict) + "</li>";
  const std::vector<double> xs(plan.batches.begin(), plan.batches.end());
  ChartAxes axes{"images/s: " + what, "batch size", "training images/s", true, true};
  if (cross > plan.batches.front()) axes.marks_x.push_back(double(cross));
  out.charts += svg_line_chart(axes, {{a, xs, rate[0]}, {b, xs, rate[1]}}) + "\n";
}

void write_sweep_outputs(const SweepOptions& o, const SweepPlan& plan, const SweepOutput& out) {
  const std::string &a = plan.variants[0].label, &b = plan.variants[1].label;
  if (!o.metrics.empty()) {
    std::ofstream file(o.metrics, std::ios::trunc);
    for (const auto& r : out.records) file << r.dump() << "\n";
    NNLAB_CHECK(file.good(), "--metrics: writing '", o.metrics, "' failed");
  }
  if (o.report.empty()) return;
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : out.records)
    rows.push_back({r["model"].get<std::string>(), fmt("%g", r["width"].get<double>()), r["math"].get<std::string>(),
                    std::to_string(r["batch"].get<int64_t>()), fmt("%.0f", r[a].get<double>()),
                    fmt("%.0f", r[b].get<double>()), fmt("%.2f", r["ratio"].get<double>())});
  const std::string body = "<p>Steady-state training images/s (" + std::to_string(o.steps) + " timed steps after " +
                           std::to_string(o.warmup) + " warm-up steps) of <b>" + html_escape(a) + "</b> (A) and <b>" +
                           html_escape(b) + "</b> (B), CPU: " + html_escape(host_cpu::model_name()) + ".</p><ul>" +
                           out.summary + "</ul>\n<h2>Images/s over batch size</h2>\n<div class='charts'>" +
                           out.charts + "</div>\n<h2>Measurements</h2>\n" +
                           html_table({"model", "width", "math", "batch", "A img/s", "B img/s", "B/A"}, rows);
  write_text_file(o.report, html_page("nnlab sweep", body));
}

int run_sweep(const SweepOptions& o) {
  const SweepPlan plan = plan_sweep(o);
  const std::string &a = plan.variants[0].label, &b = plan.variants[1].label;
  std::printf("nnlab sweep: %s vs %s, %lld timed steps after %lld warm-up steps, synthetic batches; on CUDA "
              "forward and backward as one graph where the model allows, as train runs them\n",
              a.c_str(), b.c_str(), (long long)o.steps, (long long)o.warmup);
  std::printf("%-10s %6s %5s %7s %16s %16s %8s\n", "model", "width", "math", "batch", a.c_str(), b.c_str(), "B/A");
  SweepOutput out;
  for (const ModelFile& model : plan.models)
    for (double width : plan.widths)
      for (const std::string& math : plan.maths) sweep_group(o, plan, model, width, math, out);
  write_sweep_outputs(o, plan, out);
  return 0;
}

}  // namespace

void register_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* sub = app.add_subcommand("sweep", "Steady-state images/s over batch sizes, widths and math modes, with the "
                                              "crossover batch where the CPU stops winning");
  sub->add_option("--model", o->models, "Model(s) from the zoo, comma-separated: " + model_names())
      ->capture_default_str();
  sub->add_option("--model-file", o->model_files, "Your own model file(s), comma-separated (docs/models.md)");
  sub->add_option("--devices", o->devices,
                  "Two run variants A,B (A is the CPU side): DEVICE[:threads=N][:conv=...][:math=...][:gemm=...]"
                  "[:reduce=...][:precision=fp32|bf16]; default cpu,cuda when CUDA is usable, else "
                  "cpu:threads=1,cpu");
  sub->add_option("--batches", o->batches, "Batch sizes, comma-separated")->capture_default_str();
  sub->add_option("--widths", o->widths, "Width multipliers of every hidden layer, comma-separated")->capture_default_str();
  sub->add_option("--math", o->maths, "Math modes, comma-separated: fp32, tf32, bf16 (the last two CUDA only)")->capture_default_str();
  sub->add_option("--steps", o->steps, "Timed steps per point")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed steps before them")->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads for variants that name none (default: all cores)");
  sub->add_option("--conv-impl", o->conv,
                  "Convolution: auto (the device's own choice per layer), reference (readable direct loops), im2col "
                  "(CPU) or cudnn (CUDA)")
      ->capture_default_str();
  sub->add_option("--gemm-impl", o->gemm, kGemmImplHelp)->capture_default_str();
  sub->add_option("--reduce-impl", o->reduce, kReduceImplHelp)->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the weights and the synthetic batch")->capture_default_str();
  sub->add_option("--report", o->report, "Write a self-contained HTML report to this file");
  sub->add_option("--metrics", o->metrics, "Write one JSON record per point to this file");
  add_command(sub, [sub, o] {
    o->zoo_given = sub->count("--model") > 0;
    return run_sweep(*o);
  });
}

}  // namespace nnlab
