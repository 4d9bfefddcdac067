// nnlab explain: one training step, node by node (the measurement: apps/explain_step.cpp),
// printed as a table per node, totals per layer and op family, and where the step's time
// goes: kernels, the host's own work, and on CUDA the device's idle share.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "apps/commands.h"
#include "apps/distributed/world.h"
#include "apps/explain_step.h"
#include "apps/train_config.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"
#include "layers/zoo.h"

namespace nnlab {

namespace {

// Left-aligns text in `width` columns, counting characters, not bytes ("×" is two bytes).
std::string pad(const std::string& text, size_t width) {
  size_t chars = 0;
  for (unsigned char ch : text) chars += (ch & 0xC0) != 0x80;
  return text + std::string(chars < width ? width - chars : 1, ' ');
}


// "  0.022 ms, after 0.004 ms idle": a call's time on the device's clock and, launched as
// training launches it, the device's wait for it before (explain_step.cpp, add_launch_waits).
std::string device_time_text(const KernelCall& k) {
  if (k.device_seconds < 0) return "";
  char text[64];
  std::snprintf(text, sizeof text, "  %.3f ms", k.device_seconds * 1e3);
  std::string out = text;
  if (k.launch_wait_seconds >= 0) {
    std::snprintf(text, sizeof text, ", after %.3f ms idle", k.launch_wait_seconds * 1e3);
    out += text;
  }
  return out;
}

// "3", "10×4", "2×2×2": a grid or block as the launch wrote it, trailing 1s left out.
std::string launch_dims_text(const LaunchDims& d) {
  std::string out = std::to_string(d.x);
  if (d.y > 1 || d.z > 1) out += "×" + std::to_string(d.y);
  if (d.z > 1) out += "×" + std::to_string(d.z);
  return out;
}

// --launches: under each call, the kernels it launched as kernel<<<grid, block>>> would.
void print_launches(const KernelCall& k) {
  for (const KernelLaunch& l : k.launches)
    std::printf("          %s<<<%s, %s>>>\n", l.kernel.c_str(), launch_dims_text(l.grid).c_str(),
                launch_dims_text(l.block).c_str());
}

// --launches: the step's launches in all, and its library calls, whose kernels the log cannot see.
void print_launch_totals(const DeviceExplain& d) {
  size_t launches = 0, threads = 0, library = 0;
  for (const OpRecord& r : d.ops)
    for (const KernelCall& k : r.calls) {
      library += k.family.rfind("cublas", 0) == 0 || k.family.rfind("cudnn", 0) == 0;
      for (const KernelLaunch& l : k.launches) {
        ++launches;
        threads += size_t(l.grid.x) * l.grid.y * l.grid.z * l.block.x * l.block.y * l.block.z;
      }
    }
  std::printf("%s: the step launched %zu of nnlab's kernels (%zu CUDA threads in all) and made %zu library calls "
              "(cuBLAS, cuDNN), which launch kernels of their own that the log cannot see\n",
              d.label.c_str(), launches, threads, library);
}

// Whether every run stepped through the same nodes (direction, layer, op), so one table can
// hold them side by side; a bf16 run has casts a float32 one has not.
bool same_nodes(const std::vector<DeviceExplain>& runs) {
  for (const DeviceExplain& d : runs) {
    if (d.ops.size() != runs[0].ops.size()) return false;
    for (size_t i = 0; i < d.ops.size(); ++i) {
      const OpRecord &a = d.ops[i], &b = runs[0].ops[i];
      if (a.phase != b.phase || a.layer != b.layer || a.op != b.op) return false;
    }
  }
  return true;
}

void print_explain(const std::vector<DeviceExplain>& runs, bool launches) {
  if (!same_nodes(runs)) {  // one table per run, one after the other
    for (const DeviceExplain& d : runs) {
      std::printf("%s: its own nodes (not those of %s)\n", d.label.c_str(),
                  &d == &runs[0] ? runs[1].label.c_str() : runs[0].label.c_str());
      print_explain({d}, launches);
    }
    return;
  }
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
        for (const KernelCall& k : d.ops[i].calls) {
          std::printf("      %s%s %s%s\n", runs.size() > 1 ? ("[" + d.label + "] ").c_str() : "", k.family.c_str(),
                      k.detail.c_str(), device_time_text(k).c_str());
          if (launches) print_launches(k);
        }
  }
}

// Where a CUDA step's time goes, on the device's clock: its kernels back to back (the step
// queued whole before the GPU starts) against a step as training queues it, launch by launch;
// the difference is the time the GPU sat idle waiting for the host: a small model is
// launch-bound when that share is large. Then the same for forward and backward as one graph.
void print_device_time(const DeviceExplain& d) {
  const DeviceTime& t = d.device;
  if (!t.measured) return;
  size_t calls = 0;
  for (const OpRecord& r : d.ops) calls += r.calls.size();
  const auto idle = [](double busy, double span) { return span > 0 ? 100.0 * std::max(0.0, span - busy) / span : 0.0; };
  std::printf("%s: on the device's clock (CUDA events; medians of %d steps): the step's work takes %.3f ms back to "
              "back; launched call by call, as training runs it, it spans %.3f ms: the GPU idles %.1f%% of the step "
              "waiting for the host (%.1f us per recorded call, %zu calls)\n",
              d.label.c_str(), t.repeats, t.busy_seconds * 1e3, t.span_seconds * 1e3, idle(t.busy_seconds, t.span_seconds),
              calls ? std::max(0.0, t.span_seconds - t.busy_seconds) * 1e6 / static_cast<double>(calls) : 0.0, calls);
  if (t.graph_seconds > 0)
    std::printf("%s: forward and backward as one CUDA graph of %zu nodes (train's --cuda-graphs): %.3f ms back to "
                "back, %.3f ms launched as one replay: idle %.1f%% (train's graph holds the finiteness check, the "
                "optimizer's update and the loss sum as well, not timed here)\n",
                d.label.c_str(), t.graph_nodes, t.graph_busy_seconds * 1e3, t.graph_seconds * 1e3,
                idle(t.graph_busy_seconds, t.graph_seconds));
  else if (!t.graph_obstacle.empty())
    std::printf("%s: no CUDA graph timed: %s\n", d.label.c_str(), t.graph_obstacle.c_str());
  if (t.graph_submissions >= 0)
    std::printf("%s: as that graph, the step hands the device %.0f item%s and waits for it %.0f times (counted by "
                "the simulator)\n",
                d.label.c_str(), t.graph_submissions, t.graph_submissions == 1 ? "" : "s", t.graph_host_waits);
  if (t.expired)
    std::printf("%s: the host waited for the device inside the step (a read-back), so the held times above "
                "include a wait of up to a second\n",
                d.label.c_str());
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
  // timed calls add up to the step's kernel time; a CUDA call returns once queued, so there the
  // device's own clock says it instead (print_device_time).
  if (!d.cpu) return print_device_time(d);
  const double outside = d.plain_step_seconds - d.kernel_seconds;
  // The two medians come from different steps. Kernels a little slower than a plain step mean
  // the step is all kernels within the noise; far slower (seen on a 16-core VM, OpenBLAS's
  // threads and ours contending: 44.8 against 8.8 ms) means the timings cannot be compared.
  if (outside < 0) {
    if (d.kernel_seconds <= 1.2 * d.plain_step_seconds)
      std::printf("%s: outside the kernels: nothing measurable: a step takes %.3f ms and its kernels %.3f ms "
                  "(medians of %d steps each, the kernels timed call by call); the difference is within the noise\n",
                  d.label.c_str(), d.plain_step_seconds * 1e3, d.kernel_seconds * 1e3, d.plain_repeats);
    else
      std::printf("%s: outside the kernels: not measurable here: the kernels took %.3f ms in steps timed call by "
                  "call, far more than a plain step (%.3f ms; medians of %d steps each); the timings vary too much "
                  "between steps (contending threads? try fewer --threads)\n",
                  d.label.c_str(), d.kernel_seconds * 1e3, d.plain_step_seconds * 1e3, d.plain_repeats);
    return;
  }
  std::printf("%s: outside the kernels: a step takes %.3f ms, its kernels %.3f ms (medians of %d steps without "
              "explain's hooks); the other %.3f ms (%.1f%%) are graph building, allocation, dispatch, and the "
              "untimed fills and copies\n",
              d.label.c_str(), d.plain_step_seconds * 1e3, d.kernel_seconds * 1e3, d.plain_repeats, outside * 1e3,
              100.0 * outside / d.plain_step_seconds);
}

}  // namespace

void register_explain_command(CLI::App& app) {
  struct Options {
    std::string model = "cnn", model_file, devices = "cpu", conv = "auto", gemm = "cublas", reduce = "auto",
                precision = "fp32";
    int64_t batch = 64;
    int threads = 0, repeats = 21;
    uint64_t seed = 0;
    bool launches = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("explain", "One training step node by node: shapes, FLOPs, bytes, kernels, time");
  sub->add_option("--model", o->model, "Model from the zoo: " + model_names())->capture_default_str();
  sub->add_option("--model-file", o->model_file, "Your own model, described in a JSON file (docs/models.md)");
  sub->add_option("--device", o->devices,
                  "Device(s), comma-separated: cpu, cuda, cuda:N, with optional :threads=N :conv=... :math=... "
                  ":gemm=... :reduce=...")
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size")->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads (default: all cores)");
  sub->add_option("--conv-impl", o->conv,
                  "Convolution: auto (the device's own choice per layer), reference (readable direct loops), im2col "
                  "(CPU) or cudnn (CUDA)")
      ->capture_default_str();
  sub->add_option("--gemm-impl", o->gemm, kGemmImplHelp)->capture_default_str();
  sub->add_option("--reduce-impl", o->reduce, kReduceImplHelp)->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the weights and the synthetic batch")->capture_default_str();
  sub->add_option("--repeats", o->repeats,
                  "CPU: plain steps behind each median of the time outside the kernels (the step, then its kernels "
                  "timed call by call)")
      ->capture_default_str();
  sub->add_option("--precision", o->precision,
                  "fp32 or bf16 (bf16 activations and weight copies, float32 masters: docs/precision.md), for every "
                  "device that names none with :precision=")
      ->capture_default_str();
  sub->add_flag("--launches", o->launches,
                "CUDA: under each call, the kernels it launched with their grid and block, as kernel<<<grid, block>>>");
  add_command(sub, [sub, o] {
    if (!World::get().is_root()) std::freopen("/dev/null", "w", stdout);  // under mpirun, rank 0 prints
    NNLAB_CHECK(o->batch >= 1 && o->batch <= 65536, "--batch must lie in 1..65536, got ", o->batch);
    NNLAB_CHECK(o->repeats >= 1 && o->repeats <= 10000, "--repeats must lie in 1..10000, got ", o->repeats);
    NNLAB_CHECK(sub->count("--model") == 0 || o->model_file.empty(), "give --model NAME or --model-file FILE, not both");
    const ModelFile info = o->model_file.empty() ? model_info(o->model) : read_model_file(o->model_file);
    check_model(info, recipe_input(info, "explain"), o->batch);
    std::vector<RunVariant> variants =
        parse_variants(o->devices, o->threads, parse_conv_impl(o->conv), parse_gemm_impl(o->gemm),
                       parse_reduce_impl(o->reduce));
    NNLAB_CHECK(o->precision != "tf32", "explain --precision tf32 is the math mode of float32 tensors: write --device "
                "cuda:math=tf32");
    NNLAB_CHECK(o->precision == "fp32" || o->precision == "bf16", "--precision must be fp32 or bf16, got '",
                o->precision, "'");
    for (RunVariant& v : variants) v.precision = precision_of(v, o->precision);
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
    for (const RunVariant& v : usable) runs.push_back(explain_on(v, info, o->batch, o->seed, o->repeats));
    std::printf("nnlab explain: %s, batch %lld%s, one training step after two warm-up steps; cpu kernels: %s\n",
                info.name.c_str(), static_cast<long long>(o->batch),
                o->precision == "bf16" ? ", precision bf16 (where a device names none)" : "",
                host_cpu::kernel_isa_report().c_str());
    if (!runs.front().fused_groups.empty()) {
      std::string groups;
      for (const std::string& g : runs.front().fused_groups) groups += (groups.empty() ? "" : ", ") + g;
      std::printf("fuse_epilogues: %s each run as one op, the layer with the rest as its epilogue\n", groups.c_str());
    }
    if (std::any_of(runs.begin(), runs.end(), [](const DeviceExplain& d) { return d.device.measured; }))
      std::printf("cuda: each node's ms is the GPU's own time (CUDA events), the step queued whole before the GPU "
                  "starts it\n");
    // A two-thread CPU step meets the other thread at every barrier and hand-over; what that
    // costs on this machine, now (host_cpu.h: cloud machines change it between runs).
    const bool on_cpu = std::any_of(usable.begin(), usable.end(),
                                    [](const RunVariant& v) { return v.device_text.rfind("cpu", 0) == 0; });
    if (on_cpu && host_cpu::threads() > 1)
      if (const std::optional<double> trip = host_cpu::core_round_trip_ns())
        std::printf("cpu: between its first two CPUs a cache line's round trip takes %.0f ns\n", *trip);
    if (World::get().distributed())
      std::printf("data parallel: %s; --batch %lld on every rank; the all-reduce's MB are what each rank sends in a "
                  "ring, 2(N-1)/N of the gradient bytes\n",
                  World::get().describe().c_str(), static_cast<long long>(o->batch));
    print_explain(runs, o->launches);
    for (const DeviceExplain& d : runs) {
      print_totals(d);
      if (o->launches && !d.cpu) print_launch_totals(d);
    }
    return 0;
  });
}

}  // namespace nnlab
