#include "apps/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "optim/clip.h"

namespace nnlab {

// Per-channel mean and standard deviation of a data set's images (for --normalize dataset),
// accumulated in double over all pixels.
Normalization channel_statistics(const Dataset& data) {
  const int64_t n = data.size(), c = data.channels(), plane = data.height() * data.width();
  const float* x = data.images.data<float>();
  Normalization norm;
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) {
        sum += p[j];
        sum_sq += static_cast<double>(p[j]) * p[j];
      }
    }
    const double count = static_cast<double>(n * plane), mean = sum / count;
    const double var = std::max(0.0, sum_sq / count - mean * mean);
    norm.mean.push_back(static_cast<float>(mean));
    norm.std.push_back(static_cast<float>(std::sqrt(var) > 1e-12 ? std::sqrt(var) : 1.0));
  }
  return norm;
}

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

Trainer::Trainer(TrainConfig config) : config_(std::move(config)) {
  set_cpu_threads(config_.threads);
  std::string why;
  device_ = resolve_device(config_.device, &why);
  if (config_.device == "auto") spdlog::info("{}", why);
  train_ = load_dataset(config_.data, config_.data_dir, "train");
  test_ = load_dataset(config_.data, config_.data_dir, "test");
  const InputSpec input{train_.channels(), train_.height(), train_.width(), train_.classes};
  model_ = make_model(config_.model, input, config_.seed);
  model_->to(device_);
  optimizer_ = make_optimizer(config_.optimizer, model_->parameters());
  nonfinite_flag_ = Tensor::zeros({}, DType::Int32, device_);
  optimizer_->set_skip_flag(nonfinite_flag_);
  if (config_.normalize == "dataset") normalization_ = channel_statistics(train_);
  DataLoaderOptions opts;
  opts.batch_size = config_.batch;
  opts.seed = config_.seed;
  opts.device = device_;
  opts.normalize = normalization_;
  opts.augment = Augmentation{config_.crop_padding, config_.hflip};
  loader_ = std::make_unique<DataLoader>(train_, opts);
  ScheduleOptions sched = config_.schedule_options;
  sched.lr = config_.optimizer.lr;
  schedule_ = make_schedule(config_.schedule, sched, config_.epochs * loader_->steps_per_epoch(),
                            loader_->steps_per_epoch());
  // Opened last: a run that cannot start leaves no metrics file behind.
  if (!config_.metrics.empty()) recorder_ = RunRecorder(config_.metrics);
}

EpochResult Trainer::train_epoch(int64_t epoch) {
  model_->train();
  EpochResult r;
  r.epoch = epoch;
  const auto t_epoch = Clock::now();
  loader_->start_epoch(epoch);
  const int64_t steps = loader_->steps_per_epoch();
  const bool tty = isatty(STDOUT_FILENO);
  Tensor loss_sum = Tensor::zeros({}, DType::Float32, device_);
  Batch batch;
  int64_t step = 0, images = 0;
  for (;;) {
    if (reached_max_steps()) break;
    auto t = Clock::now();
    if (!loader_->next(batch)) break;
    r.phases.data += seconds_since(t);

    t = Clock::now();
    optimizer_->zero_grad();
    Tensor loss = cross_entropy(model_->forward(batch.images), batch.labels, &nonfinite_flag_);
    r.phases.forward += seconds_since(t);

    t = Clock::now();
    loss.backward();
    r.phases.backward += seconds_since(t);

    t = Clock::now();
    if (config_.clip_grad_norm > 0) clip_grad_norm(optimizer_->params(), config_.clip_grad_norm);
    schedule_->apply(*optimizer_, global_step_);
    optimizer_->step();
    {
      NoGradGuard no_grad;
      loss_sum = add(loss_sum, loss);
    }
    r.phases.optimizer += seconds_since(t);
    ++step;
    ++global_step_;
    images += batch.images.dim(0);
    if (config_.metrics_every > 0 && global_step_ % config_.metrics_every == 0)
      recorder_.write({{"type", "step"}, {"epoch", epoch}, {"step", global_step_}, {"loss", loss.item()}});
    if (step % config_.log_interval == 0 || step == steps) {
      // The only read-backs of a step: at the log interval.
      NNLAB_CHECK(nonfinite_flag_.item() == 0, "the loss became NaN or infinite at or before step ", global_step_,
                  " (epoch ", epoch, "); no update was applied after it. Try a smaller --lr.");
      const double elapsed = seconds_since(t_epoch);
      const double mean_loss = loss_sum.item() / static_cast<double>(step);
      const double ips = static_cast<double>(images) / elapsed;
      if (tty) {
        std::printf("\r  epoch %lld  step %lld/%lld  loss %.4f  %.0f img/s   ", static_cast<long long>(epoch),
                    static_cast<long long>(step), static_cast<long long>(steps), mean_loss, ips);
        std::fflush(stdout);
      } else {
        std::printf("  epoch %lld  step %lld/%lld  loss %.4f  %.0f img/s\n", static_cast<long long>(epoch),
                    static_cast<long long>(step), static_cast<long long>(steps), mean_loss, ips);
      }
    }
  }
  if (tty) std::printf("\r%70s\r", "");
  r.seconds = seconds_since(t_epoch);
  r.train_loss = loss_sum.item() / static_cast<double>(std::max<int64_t>(step, 1));
  r.images_per_second = static_cast<double>(images) / r.seconds;
  r.test_accuracy = evaluate(test_).accuracy;
  recorder_.write({{"type", "epoch"},
                   {"epoch", epoch},
                   {"steps", step},
                   {"train_loss", r.train_loss},
                   {"test_accuracy", r.test_accuracy},
                   {"seconds", r.seconds},
                   {"images_per_second", r.images_per_second},
                   {"phase_seconds",
                    {{"data", r.phases.data},
                     {"forward", r.phases.forward},
                     {"backward", r.phases.backward},
                     {"optimizer", r.phases.optimizer}}}});
  return r;
}

EvalResult Trainer::evaluate(const Dataset& data) {
  NoGradGuard no_grad;
  model_->eval();
  Tensor correct = Tensor::zeros({}, DType::Int32, device_);
  const int64_t n = data.size();
  // In order, the training normalisation, no augmentation.
  DataLoaderOptions opts;
  opts.batch_size = 1000;
  opts.shuffle = false;
  opts.device = device_;
  opts.normalize = normalization_;
  DataLoader loader(data, opts);
  loader.start_epoch(0);
  Batch batch;
  while (loader.next(batch)) accumulate_correct(model_->forward(batch.images), batch.labels, correct);
  model_->train();
  EvalResult r;
  r.correct = static_cast<int64_t>(correct.item());
  r.total = n;
  r.accuracy = n ? static_cast<double>(r.correct) / static_cast<double>(n) : 0.0;
  return r;
}

EpochResult Trainer::run() {
  spdlog::info("model {} ({} parameters) on {}, data {} ({} train / {} test images from {})", config_.model,
               model_->parameter_count(), device_.str(), config_.data, train_.size(), test_.size(), config_.data_dir);
  spdlog::info("optimizer {}, batch {}, {} epochs, seed {}, {} CPU threads", optimizer_->describe(), config_.batch,
               config_.epochs, config_.seed, cpu_threads());
  recorder_.write({{"type", "run"},
                   {"model", config_.model},
                   {"parameters", model_->parameter_count()},
                   {"data", config_.data},
                   {"device", device_.str()},
                   {"optimizer", optimizer_->describe()},
                   {"batch", config_.batch},
                   {"epochs", config_.epochs},
                   {"seed", config_.seed},
                   {"threads", cpu_threads()},
                   {"cpu", cpu_model_name()}});
  EpochResult last;
  for (int64_t e = 1; e <= config_.epochs && !reached_max_steps(); ++e) {
    last = train_epoch(e);
    spdlog::info("epoch {}/{}  train loss {:.4f}  test accuracy {:.2f}%  {:.2f} s  {:.0f} img/s", e, config_.epochs,
                 last.train_loss, 100.0 * last.test_accuracy, last.seconds, last.images_per_second);
  }
  spdlog::info("final test accuracy {:.2f}%", 100.0 * last.test_accuracy);
  return last;
}

}  // namespace nnlab
