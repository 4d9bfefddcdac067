#include "apps/trainer.h"

#include <unistd.h>

#include <csignal>
#include <filesystem>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>

#include <spdlog/spdlog.h>

#include "apps/checkpoint.h"
#include "apps/environment.h"
#include "apps/progress.h"
#include "apps/wall_time.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"
#include "optim/clip.h"

namespace nnlab {

namespace {
using Clock = std::chrono::steady_clock;

// Set by SIGINT/SIGTERM; the loop checks it after each step. A second signal while the first
// is being handled ends the process at once, the default way.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_stop_signal = sig;
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}
}  // namespace

EpochResult Trainer::train_epoch(int64_t epoch) {
  model_->train();
  EpochResult r;
  r.epoch = epoch;
  const auto t_epoch = Clock::now();
  // A resumed run re-enters its epoch after the steps it had taken, with their loss sum.
  const bool resumed_epoch = epoch == start_epoch_;
  const int64_t skip = resumed_epoch ? start_step_ : 0;
  // The batches are built ahead on a thread of their own only when a core is free for it: a
  // CUDA run, or a CPU run on fewer threads than cores (the governor's choice under load;
  // before its first probe, which runs on one thread, the count it starts from). On cores
  // all busy with the step's parallel loops, that third thread preempted them at their
  // barriers: the mlp's epoch took 0.213–0.327 s with it against 0.205–0.207 without
  // (2 threads, 2 cores).
  const int step_threads = !governor_ ? host_cpu::threads() : governor_->chosen() > 0 ? governor_->chosen()
                                                                                      : config_max_threads_;
  loader_->set_prefetch(!device_.is_cpu() || step_threads < host_cpu::cores());
  // With a graph, a full batch's gather (data on the device) is left to the step: the graph
  // records it (Batch::gather), and an eager step runs it before its forward.
  loader_->set_deferred_gathers(graphed_ != nullptr);
  loader_->start_epoch(epoch, skip);
  const int64_t steps = loader_->steps_per_epoch();
  EpochProgress progress(epoch, config_.epochs, steps, config_.log_interval, isatty(STDOUT_FILENO));
  progress.skip_to(skip);
  // compare's per-step losses, on the device until the epoch's end (no wait per step).
  Tensor epoch_losses = keep_step_losses_ ? Tensor::empty({steps}, DType::Float32, device_) : Tensor();
  DeviceCounts counts_before;
  const bool counted = backend_for(device_).device_counts(&counts_before);
  // One tensor for the run (a CUDA graph that adds to it keeps its address), set at each epoch.
  if (!loss_sum_.defined()) loss_sum_ = Tensor::empty({}, DType::Float32, device_);
  Tensor& loss_sum = loss_sum_;
  backend_for(device_).fill(loss_sum, resumed_epoch ? start_loss_sum_ : 0.0);
  // The phases on the device's clock where it has one (CUDA); else on the host's, as they pass.
  std::unique_ptr<PhaseEvents> device_phases = PhaseEvents::on(device_);
  PhaseSeconds host_phases;
  PhaseSeconds& phases = device_phases ? host_phases : r.phases;
  const auto end_of = [&](StepPhase phase, bool empty) {
    if (device_phases) device_phases->end_of(phase, empty);
  };
  Batch batch;
  int64_t step = skip, images = 0;
  for (;;) {
    if (reached_max_steps()) break;
    const auto t_step = Clock::now();
    auto t = t_step;
    if (!loader_->next(batch)) break;
    phases.data += seconds_since(t);
    end_of(StepPhase::Data, static_cast<bool>(batch.gather));  // a deferred gather is the step's

    const Tensor loss = train_step(batch, phases, end_of);
    t = Clock::now();
    const bool whole_step_in_graph = last_step_in_graph_;
    if (!whole_step_in_graph) backend_for(device_).axpby(1.0, loss, 1.0, loss_sum);  // the graph adds its own
    phases.optimizer += seconds_since(t);
    end_of(StepPhase::Optimizer, whole_step_in_graph);
    if (governor_) adapt_threads(seconds_since(t_step));
    ++step;
    ++global_step_;
    images += batch.whole;  // the global batch: under mpirun this rank's slice is a part of it
    if (keep_step_losses_) {
      Tensor slot = epoch_losses.rows(step - skip - 1, step - skip);
      backend_for(device_).copy(loss, slot);
    }
    if (config_.metrics_every > 0 && global_step_ % config_.metrics_every == 0)
      recorder_.write({{"type", "step"}, {"epoch", epoch}, {"step", global_step_}, {"loss", loss.item()}});
    if (progress.due(step)) {
      // The only read-backs of a step: at the log interval (at most 10 a second on a terminal).
      stop_if_faulty("; no update was applied from that step on.");
      if (device_phases) device_phases->collect(r.phases);  // the device has passed them: no added wait
      const double mean_loss = loss_sum.item() / static_cast<double>(step);
      progress.show(step, mean_loss, static_cast<double>(images) / seconds_since(t_epoch));
    }
    if (config_.checkpoint_every > 0 && global_step_ % config_.checkpoint_every == 0)
      save_checkpoint(config_.checkpoint_dir + "/last.safetensors", epoch, step, loss_sum.item());
    if (stop_requested()) {
      r.interrupted = true;
      break;
    }
  }
  progress.finish();
  r.steps_done = step;
  r.loss_sum = loss_sum.item();
  if (device_phases) device_phases->collect(r.phases);  // the loss sum's read has waited for them
  if (keep_step_losses_ && step > skip)
    for (float l : epoch_losses.rows(0, step - skip).to_vector<float>()) step_losses_.push_back(l);
  if (r.interrupted) return r;
  stop_if_faulty("; no update was applied from that step on.");  // --max-steps can end between log intervals
  r.seconds = seconds_since(t_epoch);
  DeviceCounts counts_after;
  if (counted && backend_for(device_).device_counts(&counts_after) && step > skip) {
    const double steps_here = static_cast<double>(step - skip);
    r.submissions_per_step = static_cast<double>(counts_after.submissions - counts_before.submissions) / steps_here;
    r.host_waits_per_step = static_cast<double>(counts_after.host_waits - counts_before.host_waits) / steps_here;
  }
  // After the counts: reading the all-reduce's events waits for them (they are done by now).
  if (parallel_) r.allreduce_device_seconds = parallel_->reducer().take_device_seconds();
  r.train_loss = loss_sum.item() / static_cast<double>(std::max<int64_t>(step, 1));
  r.images_per_second = static_cast<double>(images) / r.seconds;
  r.test_accuracy = evaluate(test_).accuracy;
  if (val_.size() > 0) r.val_accuracy = evaluate(val_).accuracy;
  recorder_.write({{"type", "epoch"},
                   {"epoch", epoch},
                   {"device", device_label(device_)},
                   {"steps", step},
                   {"train_loss", r.train_loss},
                   {"test_accuracy", r.test_accuracy},
                   {"seconds", r.seconds},
                   {"images_per_second", r.images_per_second},
                   {"warmup_seconds", epoch_results_.empty() ? warm_up_seconds_ : 0.0},  // before this clock
                   {"threads", host_cpu::threads()},
                   {"batch_slices", config_.batch_slices},
                   {"thread_changes", governor_ ? governor_->changes() : 0},
                   // what the CUDA step was: the graph's nodes (0: eager steps only), the set on the device
                   {"cuda_graph_nodes", graphed_ && graphed_->captured() ? graphed_->nodes() : 0},
                   {"data_on_device", loader_->options().resident},
                   {"submissions_per_step", r.submissions_per_step},
                   {"host_waits_per_step", r.host_waits_per_step},
                   {"phase_seconds",
                    {{"data", r.phases.data},
                     {"forward", r.phases.forward},
                     {"backward", r.phases.backward},
                     {"optimizer", r.phases.optimizer},
                     {"allreduce", r.phases.allreduce}}},
                   // NCCL: the sums' own device time, hidden behind backward or not (-1 otherwise)
                   {"allreduce_device_seconds", r.allreduce_device_seconds}});
  return r;
}

void Trainer::adapt_threads(double step_seconds) {
  const int chosen_before = governor_->chosen();
  const int threads = governor_->after_step(step_seconds);
  if (threads != host_cpu::threads()) host_cpu::set_threads(threads);
  // The probes' own switches are not news; a new choice is (the first only when it is not the default).
  const int chosen = governor_->chosen();
  if (chosen != chosen_before && (chosen_before != 0 || chosen != config_max_threads_))
    spdlog::info("CPU threads: {}", governor_->last_decision());
}

// The step numbered global_step_ + 1. Returns its loss (on the device, not read back).
Tensor Trainer::train_step(const Batch& batch, PhaseSeconds& phases,
                           const std::function<void(StepPhase, bool)>& end_of) {
  const int64_t this_step = global_step_ + 1;
  auto t = Clock::now();
  optimizer_->zero_grad();
  if (numerics_) numerics_->set_step(guard_->describe_step(this_step));
  // In a distributed run a rank can get no sample of a small last batch; it adds zeros.
  const int64_t mine = batch.images.dim(0);
  Tensor loss = graphed_ && mine > 0 ? graphed_forward_backward(batch, this_step) : Tensor();
  const bool graphed = loss.defined();
  last_step_in_graph_ = graphed && update_in_graph_;
  if (!graphed) step_number_current_ = false;  // the device's step number did not advance
  if (graphed) {
    phases.forward += seconds_since(t);  // the replay's launch: forward and backward together
  } else if (mine > 0 && slices_) {  // forward and backward together, slice by slice
    loss = slices_->forward_backward(batch, guard_->flag(), guard_->loss_mark(this_step));
  } else if (mine > 0) {
    if (batch.gather) batch.gather();
    const Tensor logits =
        numerics_ ? numerics_->forward(*model_, batch.images) : model_->forward_for_loss(batch.images);
    loss = cross_entropy(logits, batch.labels, &guard_->flag(), guard_->loss_mark(this_step));
    if (numerics_) numerics_->check_loss(loss);
  }
  if (!graphed) phases.forward += seconds_since(t);
  end_of(StepPhase::Forward, false);

  t = Clock::now();
  if (parallel_) parallel_->begin_step(batch.whole, mine, loss, g_stop_signal != 0);
  if (mine > 0 && !graphed && !slices_) loss.backward();
  end_of(StepPhase::Backward, graphed);  // a graphed step's backward ran in the replay
  double reduce_seconds = 0;  // its own phase, not backward's
  if (parallel_) {
    // Every rank now holds the global batch's mean gradient, and its mean loss.
    parallel_->finish_step();
    reduce_seconds = parallel_->reducer().last_seconds();
    loss = Tensor::full({}, parallel_->reducer().global_loss(), DType::Float32, device_);
  }
  phases.backward += seconds_since(t) - reduce_seconds;
  phases.allreduce += reduce_seconds;
  end_of(StepPhase::Allreduce, !parallel_);

  t = Clock::now();
  if (graphed && update_in_graph_) return loss;  // checked and updated inside the graph
  // Before the optimizer (and clipping, which leaves non-finite gradients as they are): a bad
  // gradient raises the flag, so the step below and every later one is skipped. Without
  // clipping, the optimizer checks the gradients itself as it steps (step_checked: SGD on the
  // CPU reads each gradient once for both, in one parallel region).
  const bool check_apart = config_.clip_grad_norm > 0;
  if (check_apart) guard_->check_gradients(optimizer_->params(), this_step);
  if (config_.clip_grad_norm > 0) clip_grad_norm(optimizer_->params(), config_.clip_grad_norm);
  schedule_->apply(*optimizer_, global_step_);
  if (check_apart || graphed) optimizer_->step();  // a graph step checked its gradients with its loss
  else optimizer_->step_checked(guard_->gradient_marks(this_step));
  phases.optimizer += seconds_since(t);
  if (numerics_) stop_if_faulty("; no update was applied.");  // it synchronises anyway
  return loss;
}

bool Trainer::stop_requested() const {
  return parallel_ ? parallel_->reducer().stop_requested() : g_stop_signal != 0;
}

void Trainer::stop_if_faulty(const std::string& consequence) const {
  const std::string fault = guard_->fault();
  if (fault.empty()) return;
  fail(fault, consequence, " Try a smaller --lr", numerics_ ? "." : "; --check-numerics names the layer at fault.");
}

// --pace-stdin: everything printed so far goes out, then one line of standard input starts the
// epoch. The epoch's clock starts after it, so the wait is never timed.
void Trainer::wait_for_go(int64_t epoch) {
  spdlog::default_logger()->flush();
  std::printf("ready for epoch %lld\n", static_cast<long long>(epoch));
  std::fflush(stdout);
  std::string line;
  NNLAB_CHECK(static_cast<bool>(std::getline(std::cin, line)), "--pace-stdin: standard input closed before epoch ",
              epoch, "; nothing is left to start it (run without --pace-stdin to train unpaced)");
}

EpochResult Trainer::run() {
  spdlog::info("model {} ({} parameters) on {}, data {} ({} train / {} test images from {})", config_.model,
               model_->parameter_count(), device_label(device_), config_.data, train_.size(), test_.size(), config_.data_dir);
  const std::string threads = governor_ ? std::to_string(config_max_threads_) + " CPU threads (1 while other programs keep the cores busy)"
                                        : std::to_string(host_cpu::threads()) + " CPU threads";
  spdlog::info("optimizer {}, batch {}, {} epochs, seed {}, {} (denormals: {}; cpu kernels: {})", optimizer_->describe(),
               config_.batch, config_.epochs, config_.seed, threads, host_cpu::denormals_mode(), host_cpu::kernel_isa_report());
  if (device_.is_cpu()) spdlog::info("{}", host_cpu::openblas_core_report());
  if (device_.is_cpu() && host_cpu::bf16_products())
    spdlog::info("--math bf16: the Linear layers' products on bf16 inputs with float32 sums (AVX-512 BF16); "
                 "convolutions in float32");
  if (model_->compute_dtype() == DType::BFloat16)
    spdlog::info("--precision bf16: activations and weight copies in bf16; float32 master weights, optimizer state, "
                 "BatchNorm statistics and loss{}",
                 device_.is_cpu() ? " (the CPU computes each op in float32 between bf16 loads and stores)" : "");
  if (parallel_) spdlog::info("{}", parallel_->describe(config_.batch));
  if (slices_)
    spdlog::info("batch slices: each batch of {} in {} slices, forward and backward one slice a thread, the "
                 "gradients summed in slice order", config_.batch, slices_->slices());
  recorder_.write({{"type", "run"},
                   {"model", config_.model},
                   {"parameters", model_->parameter_count()},
                   {"data", config_.data},
                   {"device", device_.str()},
                   {"simulated", device_.is_cuda() && cuda_simulated()},  // CPU times, not GPU times
                   {"optimizer", optimizer_->describe()},
                   {"batch", config_.batch},
                   {"epochs", config_.epochs},
                   {"seed", config_.seed},
                   {"threads", host_cpu::threads()},
                   {"batch_slices", config_.batch_slices},
                   {"ranks", World::get().size()},
                   {"cpu", host_cpu::model_name()},
                   {"environment", environment_record(config_, device_)}});
  warm_up_seconds_ = warm_up();
  EpochResult last;
  g_stop_signal = 0;
  install_stop_handlers();
  for (int64_t e = start_epoch_; e <= config_.epochs && !reached_max_steps(); ++e) {
    if (config_.pace_stdin) wait_for_go(e);
    last = train_epoch(e);
    epoch_results_.push_back(last);
    if (last.interrupted) break;
    const std::string val =
        last.val_accuracy >= 0 ? fmt::format("  validation accuracy {:.2f}%", 100.0 * last.val_accuracy) : "";
    spdlog::info("epoch {}/{}  train loss {:.4f}  test accuracy {:.2f}%{}  {:.2f} s  {:.0f} img/s{}", e, config_.epochs,
                 last.train_loss, 100.0 * last.test_accuracy, val, last.seconds, last.images_per_second,
                 device_.is_cuda() && cuda_simulated() ? " (simulated: CPU time)" : "");
    if (last.submissions_per_step >= 0)
      spdlog::info("  per step: {:.1f} submissions to the device, {:.2f} host waits (counted by the simulator)",
                   last.submissions_per_step, last.host_waits_per_step);
    save_epoch_checkpoints(last);
    if (parallel_ ? parallel_->any(g_stop_signal != 0) : g_stop_signal != 0) last.interrupted = true;
    if (last.interrupted) break;
  }
  if (last.interrupted) {
    interrupted_signal_ = g_stop_signal != 0 ? int(g_stop_signal) : SIGTERM;  // another rank's signal
    const char* name = interrupted_signal_ == SIGINT ? "SIGINT" : "SIGTERM";
    if (config_.checkpoint_dir.empty()) {
      spdlog::warn("{}: stopped after step {}; no --checkpoint-dir, so nothing was saved", name, global_step_);
    } else {
      const std::string path = config_.checkpoint_dir + "/last.safetensors";
      save_checkpoint(path, last.epoch, last.steps_done, last.loss_sum);
      spdlog::warn("{}: stopped after step {} (epoch {}, step {}); saved {}; continue with --resume {}", name,
                   global_step_, last.epoch, last.steps_done, path, path);
    }
    return last;
  }
  spdlog::info("final test accuracy {:.2f}%", 100.0 * last.test_accuracy);
  return last;
}

}  // namespace nnlab
