// nnlab predict: the top-k classes of a trained model for the user's own images.
//
// Every image is read and converted (image_io.h: channels, bilinear resize to the model's
// input, [0, 1], the checkpoint's normalisation) before any prediction is printed. If one
// image cannot be read, each bad file is named on stderr, nothing is printed on stdout and
// the exit code is 1: a partial answer could be mistaken for a complete one in a script.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include "apps/checkpoint.h"
#include "apps/commands.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "datasets/image_io.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

struct PredictOptions {
  std::string checkpoint;
  std::vector<std::string> images;
  int64_t top_k = 3;
  std::string device = "cpu";
  int threads = 0;
};

// float32 (n, c, h, w) of every image, converted to the model's input; throws one Error
// naming every file that could not be read.
Tensor load_inputs(const std::vector<std::string>& paths, const CheckpointInfo& info) {
  const InputSpec& in = info.input;
  const int64_t n = static_cast<int64_t>(paths.size()), row = in.channels * in.height * in.width;
  Tensor batch = Tensor::empty({n, in.channels, in.height, in.width});
  std::string problems;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    try {
      const Tensor x = image_to_tensor(read_image(paths[i]), in.channels, in.height, in.width);
      std::memcpy(batch.data<float>() + i * row, x.data<float>(), sizeof(float) * row);
    } catch (const Error& e) {
      problems += std::string("\n  ") + e.what();
      ++bad;
    }
  }
  NNLAB_CHECK(bad == 0, bad, " of ", n, " image(s) cannot be read; nothing was predicted:", problems);
  normalize_image(batch, info.normalization);
  return batch;
}

// Softmax of each row of the logits (n, classes), in double from the float32 logits.
std::vector<std::vector<double>> softmax_rows(const Tensor& logits) {
  const std::vector<float> v = logits.to_vector<float>();
  const int64_t n = logits.dim(0), k = logits.dim(1);
  std::vector<std::vector<double>> out(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(k)));
  for (int64_t i = 0; i < n; ++i) {
    const float* z = v.data() + i * k;
    const double zmax = *std::max_element(z, z + k);  // subtracted so exp never overflows
    double total = 0;
    for (int64_t j = 0; j < k; ++j) total += out[i][j] = std::exp(static_cast<double>(z[j]) - zmax);
    for (double& p : out[i]) p /= total;
  }
  return out;
}

int run_predict(const PredictOptions& o) {
  NNLAB_CHECK(o.top_k >= 1, "--top-k must be at least 1, got ", o.top_k);
  host_cpu::set_threads(o.threads);
  std::string why;
  const Device device = resolve_device(o.device, &why);
  CheckpointInfo info;
  std::shared_ptr<Sequential> model = load_model_from_checkpoint(o.checkpoint, device, &info);
  const Tensor inputs = load_inputs(o.images, info);

  NoGradGuard no_grad;
  model->eval();
  // Batches of 256 images keep the memory of a long image list bounded.
  std::vector<std::vector<double>> probs;
  const int64_t n = inputs.dim(0);
  for (int64_t first = 0; first < n; first += 256) {
    const int64_t count = std::min<int64_t>(256, n - first);
    const int64_t row = inputs.numel() / n;
    Tensor chunk = Tensor::empty({count, inputs.dim(1), inputs.dim(2), inputs.dim(3)});
    std::memcpy(chunk.data<float>(), inputs.data<float>() + first * row, sizeof(float) * count * row);
    const Tensor logits = model->forward(chunk.to(device)).to(Device::cpu());
    // A checkpoint from a run that diverged gives NaN probabilities: refuse, never print them.
    NNLAB_CHECK(all_finite(logits), "the model's output is NaN or infinite: checkpoint ", o.checkpoint,
                " holds weights from a run that diverged; use an earlier checkpoint or retrain with a smaller --lr");
    for (auto& p : softmax_rows(logits)) probs.push_back(std::move(p));
  }

  for (size_t i = 0; i < probs.size(); ++i) {
    const std::vector<double>& p = probs[i];
    std::vector<int64_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    // Highest probability first; ties keep the lower class index first.
    std::stable_sort(order.begin(), order.end(), [&p](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::printf("%s\n", o.images[i].c_str());
    const int64_t k = std::min<int64_t>(o.top_k, static_cast<int64_t>(p.size()));
    for (int64_t r = 0; r < k; ++r) {
      const int64_t c = order[r];
      const std::string name = c < static_cast<int64_t>(info.class_names.size()) ? info.class_names[c]
                                                                                  : std::to_string(c);
      std::printf("  %lld. %-14s %.4f\n", static_cast<long long>(r + 1), name.c_str(), p[c]);
    }
  }
  return 0;
}

}  // namespace

void register_predict_command(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* sub = app.add_subcommand("predict", "Top-k classes of a trained model for PNG, JPEG or BMP images");
  sub->add_option("--checkpoint", o->checkpoint, "Checkpoint file written by nnlab train --checkpoint-dir")
      ->required();
  sub->add_option("--top-k", o->top_k, "How many classes to print per image")->capture_default_str();
  sub->add_option("--device", o->device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads (default: all cores)");
  sub->add_option("images", o->images, "Image files (PNG, JPEG, BMP); converted to the model's input")
      ->required();
  add_command(sub, [o] { return run_predict(*o); });
}

}  // namespace nnlab
