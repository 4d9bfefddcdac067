// nnlab eval: a checkpoint's test accuracy, per-class accuracy and confusion matrix, with
// the normalisation it was trained with.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/checkpoint.h"
#include "apps/commands.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "datasets/dataloader.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

struct EvalOptions {
  std::string checkpoint, data, data_dir, device = "cpu";
  int64_t batch = 1000;
  int64_t test_images = 0;  // the first N of the test set; 0: all
  int threads = 0;
};

// confusion[t][p] = test images of true class t predicted as class p.
std::vector<std::vector<int64_t>> confusion_matrix(Sequential& model, const Dataset& data, const EvalOptions& o,
                                                   const Normalization& norm, Device device, int64_t classes) {
  NoGradGuard no_grad;
  model.eval();
  DataLoaderOptions opts;
  opts.batch_size = o.batch;
  opts.shuffle = false;
  opts.device = device;
  opts.normalize = norm;
  DataLoader loader(data, opts);
  loader.start_epoch(0);
  std::vector<std::vector<int64_t>> confusion(classes, std::vector<int64_t>(classes, 0));
  Batch batch;
  while (loader.next(batch)) {
    const Tensor out = model.forward(batch.images);
    // A checkpoint from a run that diverged would give an arbitrary accuracy: refuse it.
    NNLAB_CHECK(all_finite(out), "the model's output is NaN or infinite: checkpoint ", o.checkpoint,
                " holds weights from a run that diverged; use an earlier checkpoint or retrain with a smaller --lr");
    const std::vector<float> logits = out.to_vector<float>();
    const std::vector<int32_t> labels = batch.labels.to_vector<int32_t>();
    for (size_t i = 0; i < labels.size(); ++i) {
      NNLAB_CHECK(labels[i] >= 0 && labels[i] < classes, "eval: label ", labels[i], " out of range for ", classes,
                  " classes");
      const float* row = logits.data() + i * classes;
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;  // first maximum, as torch.argmax
      confusion[labels[i]][best] += 1;
    }
  }
  return confusion;
}

void print_report(const std::vector<std::vector<int64_t>>& confusion, const std::vector<std::string>& names) {
  const auto classes = static_cast<int64_t>(confusion.size());
  int64_t correct = 0, total = 0;
  for (int64_t t = 0; t < classes; ++t)
    for (int64_t p = 0; p < classes; ++p) {
      total += confusion[t][p];
      if (t == p) correct += confusion[t][p];
    }
  std::printf("test accuracy %.2f%% (%lld/%lld)\n", total ? 100.0 * correct / total : 0.0,
              static_cast<long long>(correct), static_cast<long long>(total));
  std::printf("per-class accuracy:\n");
  for (int64_t t = 0; t < classes; ++t) {
    int64_t n = 0;
    for (int64_t p = 0; p < classes; ++p) n += confusion[t][p];
    const std::string name = t < static_cast<int64_t>(names.size()) ? names[t] : "class " + std::to_string(t);
    std::printf("  %2lld %-14s %6.2f%%  (%lld/%lld)\n", static_cast<long long>(t), name.c_str(),
                n ? 100.0 * confusion[t][t] / n : 0.0, static_cast<long long>(confusion[t][t]),
                static_cast<long long>(n));
  }
  std::printf("confusion matrix (rows = true class, columns = predicted class):\n     ");
  for (int64_t p = 0; p < classes; ++p) std::printf(" %5lld", static_cast<long long>(p));
  std::printf("\n");
  for (int64_t t = 0; t < classes; ++t) {
    std::printf("  %2lld ", static_cast<long long>(t));
    for (int64_t p = 0; p < classes; ++p) std::printf(" %5lld", static_cast<long long>(confusion[t][p]));
    std::printf("\n");
  }
}

int run_eval(const EvalOptions& o) {
  NNLAB_CHECK(o.batch > 0, "--batch must be at least 1, got ", o.batch);
  NNLAB_CHECK(o.threads >= 0, "--threads must be >= 0 (0 = all cores), got ", o.threads);
  NNLAB_CHECK(o.test_images >= 0, "--test-images must be >= 0 (0 = all), got ", o.test_images);
  host_cpu::set_threads(o.threads);
  std::string why;
  const Device device = resolve_device(o.device, &why);
  CheckpointInfo info;
  std::shared_ptr<Sequential> model = load_model_from_checkpoint(o.checkpoint, device, &info);
  const auto config = nlohmann::json::parse(info.metadata.at("config"));
  const std::string data = o.data.empty() ? config.value("data", "") : o.data;
  std::string dir = o.data_dir.empty() && o.data.empty() ? config.value("data_dir", "") : o.data_dir;
  if (dir.empty()) dir = default_data_dir(data);
  const Dataset test = first_samples(load_dataset(data, dir, "test"), o.test_images);
  NNLAB_CHECK(test.channels() == info.input.channels && test.height() == info.input.height &&
                  test.width() == info.input.width && test.classes == info.input.classes,
              "checkpoint ", o.checkpoint, " holds model ", info.model, " for ", info.input.channels, "x",
              info.input.height, "x", info.input.width, " images of ", info.input.classes, " classes, but ", data,
              " has ", test.channels(), "x", test.height(), "x", test.width(), " images of ", test.classes,
              " classes");
  const auto training = nlohmann::json::parse(info.metadata.at("training"));
  std::printf("checkpoint %s: model %s, epoch %lld, %lld steps in all; %s test set (%lld images) on %s%s\n",
              o.checkpoint.c_str(), info.model.c_str(), static_cast<long long>(training.value("epoch", 0)),
              static_cast<long long>(training.value("global_step", 0)), data.c_str(),
              static_cast<long long>(test.size()), device.str().c_str(),
              model->compute_dtype() == DType::BFloat16 ? ", in bf16 as it was trained" : "");
  const std::vector<std::string>& names = info.class_names.empty() ? test.class_names : info.class_names;
  print_report(confusion_matrix(*model, test, o, info.normalization, device, info.input.classes), names);
  return 0;
}

}  // namespace

void register_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* sub = app.add_subcommand("eval", "Test accuracy, per-class accuracy and confusion matrix of a checkpoint");
  sub->add_option("--checkpoint", o->checkpoint, "Checkpoint file (.safetensors) written by nnlab train")->required();
  sub->add_option("--data", o->data, "Data set to test on (default: the one the checkpoint was trained on)");
  sub->add_option("--data-dir", o->data_dir, "Folder with its files (default: the checkpoint's)");
  sub->add_option("--device", o->device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  sub->add_option("--batch", o->batch, "Images per forward pass")->capture_default_str();
  sub->add_option("--test-images", o->test_images,
                  "Evaluate on the first N test images (0 = all; the accuracy is then of those N only)")
      ->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads (default: all cores)");
  add_command(sub, [o] { return run_eval(*o); });
}

}  // namespace nnlab
