// nnlab explain's measurement (apps/explain_step.h): one training step node by node — the
// forward ops as the forward pass records them (engine forward hook), then the backward nodes
// as the engine runs them (backward hook), then the optimizer — with shapes, FLOPs and bytes
// (worked out per op family from the shapes), the kernel or library calls each made
// (devices/kernel_log.h, recorded at dispatch), and its time.
//
// Time of a node = from the previous record's end to the hook after this node, so the small
// host work between ops (a layer's bookkeeping, the engine summing gradients into a leaf) is
// counted with the node that follows it. On the CPU the device is synchronised after each
// node (explain alone does that, never training); on CUDA the step is queued whole behind a
// hold on the device's timeline and each node closes with an event, so the times are the
// GPU's own.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "apps/distributed/grad_reducer.h"
#include "apps/explain_step.h"
#include "apps/step_graph.h"
#include "apps/train_config.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "devices/gemm_impl.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "layers/fuse_epilogues.h"
#include "layers/precision.h"
#include "layers/zoo.h"
#include "optim/make_optimizer.h"

namespace nnlab {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The middle value; of an even count, the upper of the two middle ones.
double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One step as training runs it: forward, loss, backward, the all-reduce under mpirun, the optimizer.
void plain_step(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels,
                GradientReducer* reducer) {
  opt.zero_grad();
  Tensor loss = cross_entropy(model.forward_for_loss(images), labels);
  if (reducer) reducer->begin(1.0 / World::get().size(), loss, false);
  loss.backward();
  if (reducer) reducer->finish();
  opt.step();
}

// Steps as training runs them (forward, loss, backward, the all-reduce under mpirun, the
// optimizer), without explain's hooks and per-node syncs. Returns the median step time, and
// with log_kernels the median of each step's summed kernel times (the log's own cost falls
// outside the timed calls, but inside the step: that is why the step time is taken from
// separate steps with the log off).
double time_plain_steps(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels, Backend& be,
                        GradientReducer* reducer, int steps, bool log_kernels) {
  std::vector<double> step_times, kernel_times;
  for (int i = 0; i < steps; ++i) {
    std::unique_ptr<KernelLogScope> log = log_kernels ? std::make_unique<KernelLogScope>() : nullptr;
    const auto t0 = Clock::now();
    plain_step(model, opt, images, labels, reducer);
    be.synchronize();
    step_times.push_back(seconds_between(t0, Clock::now()));
    double kernels = 0;
    for (const KernelCall& k : take_kernel_calls()) kernels += std::max(k.seconds, 0.0);
    kernel_times.push_back(kernels);
  }
  return upper_median(log_kernels ? kernel_times : step_times);
}

// Left-aligns text in `width` columns, counting characters, not bytes ("×" is two bytes).

std::string op_family(const Node& node) {
  std::string name = node.name();
  const std::string suffix = "Backward";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name;
}

// "64×32×28×28" (" bf16" after it for bf16 data), as the kernel log writes shapes; "-" for none.
std::string dims(const Tensor& t) { return t.defined() ? tensor_dims(t) : "-"; }

// FLOPs of one direction of an op, from its shapes. A GEMM-like op costs 2·m·n·k per product;
// backward runs one product per input that needs a gradient. Elementwise work is counted as
// a few operations per element (an estimate; the bytes dominate for those ops anyway).
double op_flops(const std::string& op, const Node& node, const Tensor& out, int products, bool backward) {
  const std::vector<Tensor>& in = node.inputs();
  const double out_n = static_cast<double>(out.numel());
  if (op == "Linear" || op == "Matmul") {
    const double k = static_cast<double>(in[0].dim(in[0].ndim() - 1));
    return 2.0 * out_n * k * products + out_n;
  }
  if (op == "Conv2d") {
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
  // each tensor in its own dtype: a cast reads float32 and writes bf16
  const auto bytes = [](const Tensor& t) {
    return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype())) : 0.0;
  };
  double n = bytes(out);
  for (const Tensor& t : in) n += bytes(t);
  if (grads)
    for (const Tensor& g : *grads) n += bytes(g);
  return n;
}

// Measured peaks: the best of a few sgemm runs, and of a few large copies (read + write).
// The sgemm is the device's library (cuBLAS on CUDA) whatever --gemm-impl chose for the
// step, so an own GEMM kernel's time reads against the practical peak.
void measure_peaks(Device device, DeviceExplain& out) {
  NoGradGuard no_grad;
  Backend& be = backend_for(device);
  const GemmImpl step_gemm = gemm_impl();
  set_gemm_impl(GemmImpl::Cublas);
  // 4096³ keeps a GPU busy long enough to time; the simulator's rate is a CPU's anyway.
  const int64_t size = device.kind != DeviceKind::CUDA ? 512 : cuda_simulated() ? 1024 : 4096;
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
  set_gemm_impl(step_gemm);
  take_kernel_calls();
}

// The recorded step: forward layer by layer (so each op knows its layer), loss, backward,
// under mpirun the gradient all-reduce (one node: the bytes each rank sends in a ring), and
// the optimizer; the hooks close one record per node. With a timeline (CUDA) each close is a
// mark in the device's queue, whose time the caller reads after the step (OpRecord::mark);
// without one, the host waits for the device and reads its clock.
void record_step(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels, Backend& be,
                 GradientReducer* reducer, std::vector<OpRecord>& ops, DeviceTimeline* timeline) {
  std::string layer;
  std::map<const Node*, std::pair<std::string, Tensor>> forward_of;  // node -> (layer, output)
  auto last = Clock::now();
  int marks = -1;
  // A new start for the next node's time: what ran since the last close is nobody's.
  auto restart = [&]() {
    if (timeline) timeline->mark(), ++marks;
    else be.synchronize();
    last = Clock::now();
    take_kernel_calls();
  };
  auto close = [&](OpRecord r) {
    if (timeline) {
      timeline->mark();
      r.mark = ++marks;
    } else {
      be.synchronize();
      r.seconds = seconds_between(last, Clock::now());
    }
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
  bool leaf_casts_closed = false;
  set_backward_hook([&](const Node& node, const std::vector<Tensor>& grads) {
    // The casts of the weights' gradients to float32 ran as one call after the walk (the
    // engine's leaf casts): one record for all, closed at the first.
    if (is_leaf_cast(node)) {
      if (!leaf_casts_closed) close({"bwd", "weights", "Cast", "the weights' gradients to float32 (one call)", 0, 0});
      leaf_casts_closed = true;
      return;
    }
    const std::string op = op_family(node);
    const auto& [node_layer, out] = forward_of[&node];
    std::string shapes;
    int products = 0;
    for (const Tensor& g : grads) {
      shapes += (shapes.empty() ? "" : ", ") + dims(g);
      products += g.defined() && g.ndim() >= 2;  // dx and dW are products; db is a sum
    }
    // A sum hands dy on to each operand of its shape (autograd/ops/elementwise.cpp): no work.
    const Shape& dy_shape = out.shape();  // a structured binding cannot be captured in C++17
    const bool handed_on = op == "Add" && std::all_of(grads.begin(), grads.end(), [&](const Tensor& g) {
                             return !g.defined() || g.shape() == dy_shape;
                           });
    if (handed_on) {
      close({"bwd", node_layer, op, "dy " + dims(out) + " → " + shapes, 0.0, 0.0});
      return;
    }
    close({"bwd", node_layer, op, "dy " + dims(out) + " → " + shapes, op_flops(op, node, out, products, true),
           op_bytes(op, node.inputs(), out, &grads)});
  });
  KernelLogScope log;
  if (timeline) set_kernel_mark_hook([&] {
      timeline->mark();
      return ++marks;
    });
  try {
    opt.zero_grad();
    restart();
    // The model's forward step by step, as Sequential::forward_for_loss runs it: in its compute
    // dtype (bf16: the input cast on the way in, the logits left bf16 for the loss).
    const bool mixed = model.compute_dtype() != DType::Float32;
    Tensor x = images;
    const std::unique_ptr<WeightCopies> copies = model.weight_copies();  // bf16: the weights' casts, one call
    if (copies) close({"fwd", "weights", "Cast", "the weights to bf16 copies (one call)", 0, 0});
    if (mixed) {  // the batch needs no gradient, so its cast is no node: its record is made here
      x = cast(images, model.compute_dtype());
      close({"fwd", "input", "Cast", dims(images) + " → " + dims(x), 0, op_bytes("Cast", {images}, x, nullptr)});
    }
    for (const Sequential::Step& step : model.run_order()) {
      layer = step.name;
      x = step.run(x);
    }
    layer = "loss";  // bf16 logits go to the loss as they are (Sequential::forward_for_loss)
    Tensor loss = cross_entropy(x, labels);
    loss.backward();
    restart();
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
    set_kernel_mark_hook(nullptr);
    throw;
  }
  set_forward_hook(nullptr);
  set_backward_hook(nullptr);
  set_kernel_mark_hook(nullptr);
}

// The device's time for `step` (CUDA): the median over `repeats` runs of the span from a mark
// queued before it to one after it. held: the whole step queued before the device starts it,
// so the span is its work back to back (busy time); otherwise the device runs each launch as
// it arrives, as in training, and the span includes its waits for the host.
double device_seconds(Backend& be, const std::function<void()>& step, int repeats, bool held, bool& expired) {
  std::vector<double> spans;
  for (int i = 0; i < repeats; ++i) {
    std::unique_ptr<DeviceTimeline> timeline = be.timeline();
    if (held) timeline->hold();
    timeline->mark();
    step();
    timeline->mark();
    spans.push_back(timeline->read().back());
    expired = expired || timeline->expired();
    if (expired) break;  // each try would wait out the hold again
  }
  return upper_median(spans);
}

// Each call's wait for its own launch (CUDA): plain steps queued as training queues them, a
// mark on the device after every call. A call's interval between marks is then its work plus
// the time the device sat idle until the host had queued it; less the call's time in the held
// step (its work alone), the rest is that wait. The kernel log stays on for the marks, so the
// host's cost per call includes recording it, which training does not pay.
void add_launch_waits(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels, Backend& be,
                      GradientReducer* reducer, int repeats, std::vector<OpRecord>& ops) {
  std::vector<std::vector<double>> intervals;  // per call of the step, in order: one per repeat
  for (int i = 0; i < repeats; ++i) {
    std::unique_ptr<DeviceTimeline> timeline = be.timeline();
    int marks = 0;
    timeline->mark();
    std::vector<KernelCall> calls;
    {
      KernelLogScope log;
      set_kernel_mark_hook([&] {
        timeline->mark();
        return ++marks;
      });
      plain_step(model, opt, images, labels, reducer);
      set_kernel_mark_hook(nullptr);
      calls = take_kernel_calls();
    }
    const std::vector<double> at = timeline->read();
    intervals.resize(std::max(intervals.size(), calls.size()));
    for (size_t c = 0; c < calls.size(); ++c)
      if (calls[c].mark > 0) intervals[c].push_back(at[size_t(calls[c].mark)] - at[size_t(calls[c].mark - 1)]);
  }
  size_t c = 0;
  for (OpRecord& r : ops)
    for (KernelCall& k : r.calls) {
      if (c < intervals.size() && !intervals[c].empty() && k.device_seconds >= 0)
        k.launch_wait_seconds = std::max(0.0, upper_median(intervals[c]) - k.device_seconds);
      ++c;
    }
}

// The step on the device's clock: busy against span for plain steps, then forward and
// backward as one CUDA graph (as train replays them) where the model allows one.
DeviceTime time_on_device(Sequential& model, Optimizer& opt, const Tensor& images, const Tensor& labels,
                          Backend& be, GradientReducer* reducer) {
  DeviceTime t;
  t.measured = true;
  const auto step = [&] { plain_step(model, opt, images, labels, reducer); };
  // 11 steps each; 3 on the simulator, whose times are CPU times and slow to take.
  t.repeats = cuda_simulated() ? 3 : 11;
  t.busy_seconds = device_seconds(be, step, t.repeats, true, t.expired);
  t.span_seconds = device_seconds(be, step, t.repeats, false, t.expired);
  t.graph_obstacle = graph_obstacle(be.device(), false, reducer != nullptr);
  if (!t.graph_obstacle.empty()) return t;
  std::unique_ptr<StepGraph> graph = be.capture([&] {
    opt.zero_grad();
    cross_entropy(model.forward_for_loss(images), labels).backward();
  });
  t.graph_nodes = graph->nodes();
  const auto replay = [&] { graph->replay(); };
  DeviceCounts before, after;
  if (be.device_counts(&before)) {  // one replay alone, as train hands it over (issue 35's one launch)
    replay();
    be.device_counts(&after);
    t.graph_submissions = static_cast<double>(after.submissions - before.submissions);
    t.graph_host_waits = static_cast<double>(after.host_waits - before.host_waits);
    be.synchronize();
  }
  t.graph_busy_seconds = device_seconds(be, replay, t.repeats, true, t.expired);
  t.graph_seconds = device_seconds(be, replay, t.repeats, false, t.expired);
  opt.zero_grad();  // the gradients live in the graph's pool, released with it
  return t;
}

}  // namespace

DeviceExplain explain_on(const RunVariant& v, const ModelFile& info, int64_t batch, uint64_t seed, int repeats) {
  DeviceExplain out;
  out.label = v.label;
  const Device device = apply_variant(v);
  const InputSpec input = recipe_input(info, "explain");
  auto model = make_model(info, input, seed);
  fuse_epilogues(*model);
  out.fused_groups = fused_groups(*model);
  model->to(device);
  model->set_compute_dtype(precision_storage_dtype(precision_of(v), device, "precision"));
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
    record_step(*model, *opt, images, label_t, be, reducer.get(), ignored, nullptr);
  }
  std::unique_ptr<DeviceTimeline> timeline = be.timeline();
  if (timeline) timeline->hold();
  record_step(*model, *opt, images, label_t, be, reducer.get(), out.ops, timeline.get());
  if (timeline) {
    const std::vector<double> at = timeline->read();
    // Every node, and inside it every call, closed with a mark: a call's time runs from the
    // mark before it, the node's from the mark before its first call to its own.
    for (OpRecord& r : out.ops) {
      int first = r.mark;
      for (KernelCall& k : r.calls)
        if (k.mark > 0) {
          k.device_seconds = at[size_t(k.mark)] - at[size_t(k.mark - 1)];
          first = std::min(first, k.mark);
        }
      r.seconds = at[size_t(r.mark)] - at[size_t(first - 1)];
    }
    out.device = time_on_device(*model, *opt, images, label_t, be, reducer.get());
    add_launch_waits(*model, *opt, images, label_t, be, reducer.get(), out.device.repeats, out.ops);
    out.device.expired = out.device.expired || timeline->expired();
  }
  out.cpu = device.kind == DeviceKind::CPU;
  if (out.cpu) {  // the split outside the kernels; on CUDA the device's clock says it (DeviceTime)
    out.plain_repeats = repeats;
    out.plain_step_seconds = time_plain_steps(*model, *opt, images, label_t, be, reducer.get(), repeats, false);
    out.kernel_seconds = time_plain_steps(*model, *opt, images, label_t, be, reducer.get(), repeats, true);
  }
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
}  // namespace nnlab
