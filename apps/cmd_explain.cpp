// nnlab explain: one training step, node by node. Every autograd node in order — the forward
// ops as the forward pass records them (engine forward hook), then the backward nodes as the
// engine runs them (backward hook), then the optimizer — with its shapes, FLOPs and bytes
// moved (worked out per op family from the shapes), the kernel or library calls it made
// (devices/kernel_log.h, recorded at dispatch), and its measured time. To time a node the
// device is synchronised after each one: explain alone does that, never training.
//
// Time of a node = from the end of the previous record to the hook after this node, so the
// small host work between ops (a layer's bookkeeping, the engine summing gradients into a
// leaf) is counted with the node that follows it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "apps/commands.h"
#include "apps/distributed/grad_reducer.h"
#include "apps/run_variant.h"
#include "apps/train_config.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "devices/cpu/core_latency.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/threads.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "layers/zoo.h"
#include "optim/make_optimizer.h"

namespace nnlab {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct OpRecord {
  std::string phase, layer, op, shapes;
  double flops = 0, bytes = 0, seconds = 0;
  std::vector<KernelCall> calls;
};

struct DeviceExplain {
  std::string label;
  std::vector<OpRecord> ops;
  double sgemm_gflops = 0, copy_gbytes = 0;  // the device's measured peaks
  bool cpu = false;
  double plain_step_seconds = 0;  // median of plain steps: no hooks, no kernel log, no per-node sync
  double kernel_seconds = 0;      // median of the kernel time of such steps (timed by the kernel log)
  // One plain step's work items handed to the device and waits of the host inside it, where
  // the device counts them (the CUDA simulator); -1 elsewhere.
  double submissions = -1, host_waits = -1;
};

// Steps as training runs them (forward, loss, backward, the all-reduce under mpirun, the
// optimizer), without explain's hooks and per-node syncs. Returns the median step time, and
// with log_kernels the median of each step's summed kernel times (the log's own cost falls
// outside the timed calls, but inside the step: that is why the step time is taken from
// separate steps with the log off).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_plain_steps(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels, Backend& be,
                        GradientReducer* reducer, int steps, bool log_kernels) {
  std::vector<double> step_times, kernel_times;
  for (int i = 0; i < steps; ++i) {
    std::unique_ptr<KernelLogScope> log = log_kernels ? std::make_unique<KernelLogScope>() : nullptr;
    const auto t0 = Clock::now();
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(images), labels);
    if (reducer) reducer->begin(1.0 / World::get().size(), loss, false);
    loss.backward();
    if (reducer) reducer->finish();
    opt.step();
    be.synchronize();
    step_times.push_back(seconds_between(t0, Clock::now()));
    double kernels = 0;
    for (const KernelCall& k : take_kernel_calls()) kernels += std::max(k.seconds, 0.0);
    kernel_times.push_back(kernels);
  }
  return median(log_kernels ? kernel_times : step_times);
}

// Left-aligns text in `width` columns, counting characters, not bytes ("×" is two bytes).
std::string pad(const std::string& text, size_t width) {
  size_t chars = 0;
  for (unsigned char ch : text) chars += (ch & 0xC0) != 0x80;
  return text + std::string(chars < width ? width - chars : 1, ' ');
}

std::string op_family(const Node& node) {
  std::string name = node.name();
  const std::string suffix = "Backward";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name;
}

std::string dims(const Tensor& t) {
  if (!t.defined()) return "-";
  std::string out;
  for (int64_t d : t.shape()) out += (out.empty() ? "" : "×") + std::to_string(d);
  return out.empty() ? "scalar" : out;
}

// FLOPs of one direction of an op, from its shapes. A GEMM-like op costs 2·m·n·k per product;
// backward runs one product per input that needs a gradient. Elementwise work is counted as
// a few operations per element (an estimate; the bytes dominate for those ops anyway).
double op_flops(const std::string& op, const Node& node, const Tensor& out, int products, bool backward) {
  const std::vector<Tensor>& in = node.inputs();
  const double out_n = static_cast<double>(out.numel());
  if (op == "Linear" || op == "LinearRelu" || op == "Matmul") {
    const double k = static_cast<double>(in[0].dim(in[0].ndim() - 1));
    return 2.0 * out_n * k * products + out_n;
  }
  if (op == "Conv2d" || op == "Conv2dRelu" || op == "Conv2dMaxPool2dRelu") {
    // A pooled convolution's own output is the node's hidden one; out is the pool's.
    const Shape hidden = node.hidden_output_shape();
    const double conv_n = hidden.empty() ? out_n : static_cast<double>(shape_numel(hidden));
    const double crs = static_cast<double>(in[1].dim(1) * in[1].dim(2) * in[1].dim(3));
    return 2.0 * conv_n * crs * products + conv_n;
  }
  if (op == "Reshape") return 0;
  const double in_n = in.empty() || !in[0].defined() ? out_n : static_cast<double>(in[0].numel());
  const double per = op == "BatchNorm" ? 8 : op == "CrossEntropy" || op == "LogSoftmax" ? 5 : 1;
  return std::max(in_n, out_n) * per * (backward ? 2 : 1);
}

// Bytes the op must at least read and write: its inputs and output forward; backward reads
// the saved inputs and dy and writes one gradient per input that needs it.
double op_bytes(const std::string& op, const std::vector<Tensor>& in, const Tensor& out,
                const std::vector<Tensor>* grads) {
  if (op == "Reshape") return 0;  // a view: no data moves
  double n = static_cast<double>(out.numel());
  for (const Tensor& t : in) n += t.defined() ? static_cast<double>(t.numel()) : 0.0;
  if (grads)
    for (const Tensor& g : *grads) n += g.defined() ? static_cast<double>(g.numel()) : 0.0;
  return n * static_cast<double>(dtype_size(out.dtype()));
}

// Measured peaks: the best of a few sgemm runs, and of a few large copies (read + write).
void measure_peaks(Device device, DeviceExplain& out) {
  NoGradGuard no_grad;
  Backend& be = backend_for(device);
  const int64_t size = device.kind == DeviceKind::CUDA ? 4096 : 512;
  Tensor a = Tensor::empty({size, size}), b = Tensor::empty({size, size});
  uniform_fill(a, -1, 1, RandomStream{1, RandomPurpose::Init, 0});
  uniform_fill(b, -1, 1, RandomStream{1, RandomPurpose::Init, 1});
  a = a.to(device);
  b = b.to(device);
  Tensor c = Tensor::empty({size, size}, DType::Float32, device);
  Tensor big = Tensor::zeros({int64_t(1) << 24}, DType::Float32, device), copy = Tensor::empty(big.shape(),
                                                                                                DType::Float32, device);
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = Clock::now();
    be.gemm(false, false, size, size, size, 1.0, a, b, 0.0, c);
    be.synchronize();
    auto t1 = Clock::now();
    be.copy(big, copy);
    be.synchronize();
    auto t2 = Clock::now();
    if (rep == 0) continue;  // warm-up
    out.sgemm_gflops = std::max(out.sgemm_gflops, 2.0 * double(size) * double(size) * double(size) /
                                                       seconds_between(t0, t1) / 1e9);
    out.copy_gbytes = std::max(out.copy_gbytes, 2.0 * double(big.nbytes()) / seconds_between(t1, t2) / 1e9);
  }
  take_kernel_calls();
}

// The recorded step: forward layer by layer (so each op knows its layer), loss, backward,
// under mpirun the gradient all-reduce (one node: the bytes each rank sends in a ring), and
// the optimizer; the hooks close one record per node.
void record_step(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels, Backend& be,
                 GradientReducer* reducer, std::vector<OpRecord>& ops) {
  std::string layer;
  std::map<const Node*, std::pair<std::string, Tensor>> forward_of;  // node -> (layer, output)
  auto last = Clock::now();
  auto close = [&](OpRecord r) {
    be.synchronize();
    r.seconds = seconds_between(last, Clock::now());
    r.calls = take_kernel_calls();
    ops.push_back(std::move(r));
    last = Clock::now();
  };
  set_forward_hook([&](const Node& node, const Tensor& out) {
    const std::string op = op_family(node);
    std::string shapes;
    for (const Tensor& t : node.inputs()) shapes += (shapes.empty() ? "" : ", ") + dims(t);
    close({"fwd", layer, op, shapes + " → " + dims(out), op_flops(op, node, out, 1, false),
           op_bytes(op, node.inputs(), out, nullptr)});
    forward_of[&node] = {layer, out};
  });
  set_backward_hook([&](const Node& node, const std::vector<Tensor>& grads) {
    const std::string op = op_family(node);
    const auto& [node_layer, out] = forward_of[&node];
    std::string shapes;
    int products = 0;
    for (const Tensor& g : grads) {
      shapes += (shapes.empty() ? "" : ", ") + dims(g);
      products += g.defined() && g.ndim() >= 2;  // dx and dW are products; db is a sum
    }
    close({"bwd", node_layer, op, "dy " + dims(out) + " → " + shapes, op_flops(op, node, out, products, true),
           op_bytes(op, node.inputs(), out, &grads)});
  });
  KernelLogScope log;
  try {
    opt.zero_grad();
    last = Clock::now();
    Tensor x = images;
    for (const auto& [name, child] : model.run_order()) {
      layer = name;
      x = child->forward(x);
    }
    layer = "loss";
    Tensor loss = cross_entropy(x, labels);
    loss.backward();
    be.synchronize();
    last = Clock::now();
    take_kernel_calls();
    if (reducer) {
      const int ranks = World::get().size();
      reducer->begin(1.0 / ranks, loss, false);  // every rank's batch is --batch: a share of 1/N
      reducer->finish();
      close({"comm", "allreduce", "AllReduce",
             std::to_string(opt.params().size()) + " tensors, " + std::to_string(reducer->bucket_count()) +
                 " bucket(s), " + std::to_string(ranks) + " ranks",
             0, reducer->ring_bytes_per_rank()});
    }
    opt.step();
    close({"opt", "optimizer", "step", std::to_string(opt.params().size()) + " tensors", 0, 0});
  } catch (...) {
    set_forward_hook(nullptr);
    set_backward_hook(nullptr);
    throw;
  }
  set_forward_hook(nullptr);
  set_backward_hook(nullptr);
}

DeviceExplain explain_on(const RunVariant& v, const ModelFile& info, int64_t batch, uint64_t seed) {
  DeviceExplain out;
  out.label = v.label;
  const Device device = apply_variant(v);
  const InputSpec input = recipe_input(info, "explain");
  auto model = make_model(info, input, seed);
  model->to(device);
  OptimizerConfig oc;
  oc.name = info.recipe.optimizer;
  oc.lr = info.recipe.lr;
  oc.momentum = oc.name == "sgd" ? info.recipe.momentum : 0.0;
  auto opt = make_optimizer(oc, model->parameters());
  // A synthetic batch: the kernels a step runs depend on the shapes, not on the pixels.
  Tensor images = Tensor::empty({batch, input.channels, input.height, input.width});
  uniform_fill(images, 0, 1, RandomStream{seed, RandomPurpose::Augment, 7});
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = int32_t(i % input.classes);
  images = images.to(device);
  Tensor label_t = Tensor::from_vector(labels, {batch}).to(device);
  Backend& be = backend_for(device);
  std::unique_ptr<GradientReducer> reducer;
  if (World::get().distributed())
    reducer = std::make_unique<GradientReducer>(World::get(), opt->params(), AllReduceMode::step, 0,
                                                decide_allreduce_backend(World::get(), device,
                                                                         AllReduceBackendRequest::automatic));
  for (int warm = 0; warm < 2; ++warm) {  // the step twice first: caches, algorithm choices, allocator
    std::vector<OpRecord> ignored;
    record_step(*model, *opt, images, label_t, be, reducer.get(), ignored);
  }
  record_step(*model, *opt, images, label_t, be, reducer.get(), out.ops);
  out.cpu = device.kind == DeviceKind::CPU;
  out.plain_step_seconds = time_plain_steps(*model, *opt, images, label_t, be, reducer.get(), 21, false);
  out.kernel_seconds = time_plain_steps(*model, *opt, images, label_t, be, reducer.get(), 21, true);
  DeviceCounts before, after;
  if (be.device_counts(&before)) {
    time_plain_steps(*model, *opt, images, label_t, be, reducer.get(), 1, false);
    be.device_counts(&after);
    out.submissions = static_cast<double>(after.submissions - before.submissions);
    out.host_waits = static_cast<double>(after.host_waits - before.host_waits) - 1;  // less the step's closing sync
  }
  measure_peaks(device, out);
  return out;
}

void print_explain(const std::vector<DeviceExplain>& runs) {
  int layer_width = 11, op_width = 13;  // wider where a fused layer's names need it
  for (const OpRecord& r : runs[0].ops) {
    layer_width = std::max(layer_width, static_cast<int>(r.layer.size()));
    op_width = std::max(op_width, static_cast<int>(r.op.size()));
  }
  std::printf("%-3s %-4s %-*s %-*s %s%9s %9s", "#", "dir", layer_width, "layer", op_width, "op",
              pad("shapes", 48).c_str(), "MFLOP", "MB");
  for (const DeviceExplain& d : runs) std::printf(" %14s", (d.label + " ms").c_str());
  std::printf("\n");
  const std::vector<OpRecord>& ref = runs[0].ops;
  for (size_t i = 0; i < ref.size(); ++i) {
    const OpRecord& r = ref[i];
    std::printf("%-3zu %-4s %-*s %-*s %s%9.2f %9.2f", i + 1, r.phase.c_str(), layer_width, r.layer.c_str(), op_width,
                r.op.c_str(), pad(r.shapes, 48).c_str(), r.flops / 1e6, r.bytes / 1e6);
    for (const DeviceExplain& d : runs)
      if (i < d.ops.size()) std::printf(" %14.3f", d.ops[i].seconds * 1e3);
    std::printf("\n");
    for (const DeviceExplain& d : runs)
      if (i < d.ops.size())
        for (const KernelCall& k : d.ops[i].calls)
          std::printf("      %s%s %s\n", runs.size() > 1 ? ("[" + d.label + "] ").c_str() : "", k.family.c_str(),
                      k.detail.c_str());
  }
}

void print_totals(const DeviceExplain& d) {
  int layer_width = 11, op_width = 13;
  for (const OpRecord& r : d.ops) {
    layer_width = std::max(layer_width, static_cast<int>(r.layer.size()));
    op_width = std::max(op_width, static_cast<int>(r.op.size()));
  }
  std::printf("\n%s: totals per layer\n  %-*s %10s %10s %10s %9s\n", d.label.c_str(), layer_width, "layer", "MFLOP",
              "MB", "ms", "GFLOP/s");
  std::vector<std::string> order;
  std::map<std::string, OpRecord> layers, families;
  double total_s = 0, total_flops = 0, total_bytes = 0;
  for (const OpRecord& r : d.ops) {
    if (!layers.count(r.layer)) order.push_back(r.layer);
    for (auto* m : {&layers[r.layer], &families[r.op]}) {
      m->flops += r.flops;
      m->bytes += r.bytes;
      m->seconds += r.seconds;
    }
    total_s += r.seconds, total_flops += r.flops, total_bytes += r.bytes;
  }
  for (const std::string& name : order) {
    const OpRecord& l = layers[name];
    std::printf("  %-*s %10.2f %10.2f %10.3f %9.2f\n", layer_width, name.c_str(), l.flops / 1e6, l.bytes / 1e6,
                l.seconds * 1e3, l.seconds > 0 ? l.flops / l.seconds / 1e9 : 0.0);
  }
  std::printf("%s: share of time per op family\n", d.label.c_str());
  for (const auto& [name, f] : families)
    std::printf("  %-*s %6.1f%%  %9.3f ms\n", op_width, name.c_str(), 100.0 * f.seconds / total_s, f.seconds * 1e3);
  std::printf("%s: step %.3f ms, %.2f GFLOP, %.1f MB; achieved %.2f GFLOP/s of %.2f measured sgemm peak (%.1f%%), "
              "%.2f GB/s of %.2f measured copy bandwidth (%.1f%%)\n",
              d.label.c_str(), total_s * 1e3, total_flops / 1e9, total_bytes / 1e6, total_flops / total_s / 1e9,
              d.sgemm_gflops, 100.0 * total_flops / total_s / 1e9 / d.sgemm_gflops, total_bytes / total_s / 1e9,
              d.copy_gbytes, 100.0 * total_bytes / total_s / 1e9 / d.copy_gbytes);
  if (d.submissions >= 0)
    std::printf("%s: one eager step hands the device %.0f items (kernels, copies, library calls) and waits for it "
                "%.0f times inside the step (counted by the simulator); train replays the step as a CUDA graph "
                "where it can (docs/gpu.md)\n",
                d.label.c_str(), d.submissions, d.host_waits);
  // The time outside the kernels. A CPU kernel has finished when its dispatch returns, so its
  // timed calls add up to the step's kernel time; a CUDA call's time is its launch's, so there
  // the split is not shown.
  if (!d.cpu) return;
  const double outside = d.plain_step_seconds - d.kernel_seconds;
  // The two medians come from different steps. Kernels a little slower than a plain step mean
  // the step is all kernels within the noise; far slower (seen on a 16-core VM, OpenBLAS's
  // threads and ours contending: 44.8 against 8.8 ms) means the timings cannot be compared.
  if (outside < 0) {
    if (d.kernel_seconds <= 1.2 * d.plain_step_seconds)
      std::printf("%s: outside the kernels: nothing measurable: a step takes %.3f ms and its kernels %.3f ms "
                  "(medians of 21 steps each, the kernels timed call by call); the difference is within the noise\n",
                  d.label.c_str(), d.plain_step_seconds * 1e3, d.kernel_seconds * 1e3);
    else
      std::printf("%s: outside the kernels: not measurable here: the kernels took %.3f ms in steps timed call by "
                  "call, far more than a plain step (%.3f ms); the timings vary too much between steps (contending "
                  "threads? try fewer --threads)\n",
                  d.label.c_str(), d.kernel_seconds * 1e3, d.plain_step_seconds * 1e3);
    return;
  }
  std::printf("%s: outside the kernels: a step takes %.3f ms, its kernels %.3f ms (medians of 21 steps without "
              "explain's hooks); the other %.3f ms (%.1f%%) are graph building, allocation, dispatch, and the "
              "untimed fills and copies\n",
              d.label.c_str(), d.plain_step_seconds * 1e3, d.kernel_seconds * 1e3, outside * 1e3,
              100.0 * outside / d.plain_step_seconds);
}

}  // namespace

void register_explain_command(CLI::App& app) {
  struct Options {
    std::string model = "cnn", model_file, devices = "cpu", conv = "auto";
    int64_t batch = 64;
    int threads = 0;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("explain", "One training step node by node: shapes, FLOPs, bytes, kernels, time");
  sub->add_option("--model", o->model, "Model from the zoo: " + model_names())->capture_default_str();
  sub->add_option("--model-file", o->model_file, "Your own model, described in a JSON file (docs/models.md)");
  sub->add_option("--device", o->devices,
                  "Device(s), comma-separated: cpu, cuda, cuda:N, with optional :threads=N :conv=... :math=...")
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size")->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads (default: all cores)");
  sub->add_option("--conv-impl", o->conv,
                  "Convolution: auto (the device's own choice per layer), reference (readable direct loops), im2col "
                  "(CPU) or cudnn (CUDA)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the weights and the synthetic batch")->capture_default_str();
  add_command(sub, [sub, o] {
    if (!World::get().is_root()) std::freopen("/dev/null", "w", stdout);  // under mpirun, rank 0 prints
    NNLAB_CHECK(o->batch >= 1 && o->batch <= 65536, "--batch must lie in 1..65536, got ", o->batch);
    NNLAB_CHECK(sub->count("--model") == 0 || o->model_file.empty(), "give --model NAME or --model-file FILE, not both");
    const ModelFile info = o->model_file.empty() ? model_info(o->model) : read_model_file(o->model_file);
    check_model(info, recipe_input(info, "explain"), o->batch);
    std::vector<RunVariant> variants = parse_variants(o->devices, o->threads, parse_conv_impl(o->conv));
    std::vector<RunVariant> usable;
    for (const RunVariant& v : variants) {
      if (v.device_text.rfind("cuda", 0) == 0 && variants.size() > 1 && !cuda_status().usable) {
        std::printf("%s: not usable: %s\n", v.label.c_str(), cuda_status().reason.c_str());
        continue;  // the side-by-side view shows what it can; a lone cuda request fails below
      }
      usable.push_back(v);
    }
    NNLAB_CHECK(!usable.empty(), "explain: no device of '", o->devices, "' is usable here: ", cuda_status().reason);
    check_variants(usable);
    std::vector<DeviceExplain> runs;
    for (const RunVariant& v : usable) runs.push_back(explain_on(v, info, o->batch, o->seed));
    std::printf("nnlab explain: %s, batch %lld, one training step after two warm-up steps; cpu kernels: %s\n",
                info.name.c_str(), static_cast<long long>(o->batch), cpu_isa_report().c_str());
    // A two-thread CPU step meets the other thread at every barrier and hand-over; what that
    // costs on this machine, now (core_latency.h: cloud machines change it between runs).
    const bool on_cpu = std::any_of(usable.begin(), usable.end(),
                                    [](const RunVariant& v) { return v.device_text.rfind("cpu", 0) == 0; });
    if (on_cpu && cpu_threads() > 1)
      if (const std::optional<double> trip = core_round_trip_ns())
        std::printf("cpu: between its first two CPUs a cache line's round trip takes %.0f ns\n", *trip);
    if (World::get().distributed())
      std::printf("data parallel: %s; --batch %lld on every rank; the all-reduce's MB are what each rank sends in a "
                  "ring, 2(N-1)/N of the gradient bytes\n",
                  World::get().describe().c_str(), static_cast<long long>(o->batch));
    print_explain(runs);
    for (const DeviceExplain& d : runs) print_totals(d);
    return 0;
  });
}

}  // namespace nnlab
