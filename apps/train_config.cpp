#include "apps/train_config.h"

#include <cmath>

#include "apps/checkpoint.h"
#include "core/error.h"
#include "datasets/dataset.h"
#include "devices/registry.h"
#include "layers/precision.h"
#include "layers/zoo.h"

namespace nnlab {

void add_train_options(CLI::App& app, TrainConfig& c) {
  app.add_option("--data", c.data, "Data set: fashion-mnist, mnist, cifar10, folder (ROOT/<class>/*.png|jpg|bmp in --data-dir), "
                 "or synthetic-cifar10 (random CIFAR-shaped data, for timing) (default: the model's)");
  app.add_option("--data-dir", c.data_dir,
                 "Folder with the data files (default: the copy nnlab data fetch installed; for fashion-mnist, else "
                 "/usr/share/datasets/fashion-mnist)");
  app.add_option("--model", c.model, "Model from the zoo: " + model_names())->capture_default_str();
  app.add_option("--model-file", c.model_file,
                 "Your own model, described in a JSON file (docs/models.md; `nnlab models --show cnn` prints one)");
  app.add_option("--epochs", c.epochs, "Training epochs")->capture_default_str();
  app.add_option("--batch", c.batch, "Batch size (default: the model's recipe, 64)");
  app.add_option("--optimizer", c.optimizer.name, "sgd, adam or adamw (default: the model's recipe)");
  app.add_option("--lr", c.optimizer.lr, "Learning rate (default: the model's recipe)");
  app.add_option("--momentum", c.optimizer.momentum, "SGD momentum (default: the model's recipe)");
  app.add_flag("--nesterov", c.optimizer.nesterov, "Nesterov momentum (SGD)");
  app.add_option("--weight-decay", c.optimizer.weight_decay, "Weight decay (L2 for sgd/adam, decoupled for adamw)");
  app.add_option("--betas", c.betas, "Adam betas as B1,B2 (default 0.9,0.999)");
  app.add_option("--schedule", c.schedule, "Learning-rate schedule: none, step, cosine, warmup-cosine, onecycle")
      ->capture_default_str();
  app.add_option("--step-epochs", c.schedule_options.step_epochs, "step schedule: epochs between decays")
      ->capture_default_str();
  app.add_option("--gamma", c.schedule_options.gamma, "step schedule: decay factor")->capture_default_str();
  app.add_option("--min-lr", c.schedule_options.min_lr, "cosine schedules: final learning rate")
      ->capture_default_str();
  app.add_option("--warmup-steps", c.schedule_options.warmup_steps,
                 "warmup-cosine: linear warm-up steps (0 = one epoch)");
  app.add_option("--clip-grad-norm", c.clip_grad_norm, "Clip gradients to this global L2 norm (0 = off)");
  app.add_option("--crop-padding", c.crop_padding, "Augmentation: random crop after padding by N pixels");
  app.add_flag("--hflip", c.hflip, "Augmentation: random horizontal flip");
  app.add_option("--normalize", c.normalize,
                 "none, or dataset: subtract the training set's per-channel mean, divide by its std")
      ->capture_default_str();
  app.add_option("--seed", c.seed, "Seed of every random draw (weights, shuffles, dropout)")->capture_default_str();
  app.add_option("--threads", c.threads,
                 "CPU threads for nnlab and OpenBLAS (default: all cores, or 1 while other programs keep the cores "
                 "busy, measured as training runs; a number pins the count and makes runs repeat bit for bit)");
  app.add_option("--batch-slices", c.batch_slices,
                 "CPU: cut each batch into this many slices, each run forward and backward on one thread with the "
                 "gradients summed in slice order (data parallelism inside the process; a run repeats bit for bit "
                 "whatever the thread count). 1: each op over the whole batch on all threads")
      ->capture_default_str();
  app.add_option("--denormals", c.denormals,
                 "CPU: flush denormal floats to zero (fast) or keep them (IEEE gradual underflow, up to ~100x slower "
                 "per operation that meets one)")
      ->capture_default_str();
  app.add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--math", c.math, "fp32 (strict float32), tf32 or bf16, an explicit, recorded choice. CUDA: tensor cores "
                 "(bf16: cuBLAS products on bf16 inputs, cuDNN convolutions in TF32). CPU: bf16 only, where it has "
                 "AVX-512 BF16 (Linear layers' and matmul's products on bf16 inputs, float32 sums; convolutions in fp32)")
      ->capture_default_str();
  app.add_option("--precision", c.precision,
                 "fp32, tf32 (float32 tensors on TF32 tensor cores: --math tf32) or bf16 (mixed precision: bf16 "
                 "activations and weight copies; float32 master weights, optimizer state, BatchNorm statistics and "
                 "loss). On the CPU, bf16 is stored as bf16 and computed in float32 (docs/precision.md)")
      ->capture_default_str();
  app.add_flag("--deterministic", c.deterministic,
               "CUDA: deterministic cuDNN algorithms, chosen by heuristics, not timing (a run repeats bit for bit)");
  app.add_option("--log-interval", c.log_interval, "Steps between progress updates")->capture_default_str();
  app.add_option("--max-steps", c.max_steps, "Stop after this many training steps in all (0 = no limit)");
  app.add_option("--metrics", c.metrics, "Write run records to this file, one JSON object per line");
  app.add_option("--metrics-every", c.metrics_every,
                 "Also record every N-th step's loss (reads the loss back each such step)");
  app.add_option("--checkpoint-dir", c.checkpoint_dir,
                 "Save DIR/last.safetensors after every epoch (and DIR/best.safetensors with --val-split)");
  app.add_option("--checkpoint-every", c.checkpoint_every, "Also save DIR/last.safetensors every N steps");
  app.add_option("--val-split", c.val_split,
                 "Hold out this fraction of the training set (seeded) to pick the best checkpoint");
  app.add_option("--resume", c.resume, "Continue the run saved in this checkpoint (same options as the first run)");
}

namespace {
void check_finite_non_negative(const char* option, double v) {
  NNLAB_CHECK(std::isfinite(v) && v >= 0, option, " must be a finite number >= 0, got ", v);
}
}  // namespace

bool fixed_input(const std::string& data, InputSpec& input) {
  if (data == "fashion-mnist" || data == "mnist") input = InputSpec{1, 28, 28, 10};
  else if (data == "cifar10" || data == "synthetic-cifar10") input = InputSpec{3, 32, 32, 10};
  else return false;
  return true;
}

InputSpec recipe_input(const ModelFile& m, const char* command) {
  InputSpec input;
  NNLAB_CHECK(fixed_input(m.recipe.data, input), m.origin, ": its recipe's data set '", m.recipe.data,
              "' has no fixed image size; ", command, " needs one (set the recipe's \"data\" to fashion-mnist, "
              "mnist or cifar10)");
  return input;
}

void finalize_train_config(const CLI::App& app, TrainConfig& c) {
  NNLAB_CHECK(app.count("--model") == 0 || c.model_file.empty(), "give --model NAME or --model-file FILE, not both");
  if (!c.model_file.empty()) c.model_spec = read_model_file(c.model_file);
  else if (!c.resume.empty() && app.count("--model") == 0) c.model_spec = checkpoint_model_file(c.resume);
  else c.model_spec = model_info(c.model);
  c.model = c.model_spec.name;
  const ModelRecipe& recipe = c.model_spec.recipe;
  if (c.data.empty()) c.data = recipe.data;
  NNLAB_CHECK(c.data == "fashion-mnist" || c.data == "mnist" || c.data == "cifar10" || c.data == "folder" ||
                  c.data == "synthetic-cifar10",
              "--data '", c.data,
              "' is not a known data set; choose fashion-mnist, mnist, cifar10, folder or synthetic-cifar10");
  if (c.data_dir.empty()) c.data_dir = default_data_dir(c.data);
  NNLAB_CHECK(!c.data_dir.empty() || c.data == "synthetic-cifar10", "--data-dir is required for --data ", c.data,
              " (the folder holding its files), or fetch the data set first: nnlab data fetch ", c.data);
  // A model that cannot be built for this data set fails here, before anything is written.
  if (app.count("--batch") == 0) c.batch = recipe.batch;
  if (app.count("--epochs") == 0 && recipe.epochs > 0) c.epochs = recipe.epochs;
  NNLAB_CHECK(c.batch > 0, "--batch must be at least 1, got ", c.batch);
  InputSpec input;
  if (fixed_input(c.data, input)) check_model(c.model_spec, input, c.batch);
  if (app.count("--optimizer") == 0) c.optimizer.name = recipe.optimizer;
  if (app.count("--lr") == 0) c.optimizer.lr = recipe.lr;
  if (app.count("--momentum") == 0) c.optimizer.momentum = c.optimizer.name == "sgd" ? recipe.momentum : 0.0;
  if (app.count("--schedule") == 0) c.schedule = recipe.schedule;
  NNLAB_CHECK(c.optimizer.name == "sgd" || c.optimizer.name == "adam" || c.optimizer.name == "adamw",
              "--optimizer '", c.optimizer.name, "' is not known; choose sgd, adam or adamw");
  if (c.optimizer.name == "adamw" && app.count("--weight-decay") == 0) c.optimizer.weight_decay = 0.01;
  NNLAB_CHECK(c.epochs > 0, "--epochs must be at least 1, got ", c.epochs);
  NNLAB_CHECK(c.log_interval > 0, "--log-interval must be at least 1, got ", c.log_interval);
  NNLAB_CHECK(c.max_steps >= 0, "--max-steps must be >= 0, got ", c.max_steps);
  NNLAB_CHECK(c.metrics_every >= 0, "--metrics-every must be >= 0, got ", c.metrics_every);
  NNLAB_CHECK(c.metrics_every == 0 || !c.metrics.empty(), "--metrics-every needs --metrics FILE");
  check_finite_non_negative("--clip-grad-norm", c.clip_grad_norm);
  NNLAB_CHECK(c.checkpoint_every >= 0, "--checkpoint-every must be >= 0, got ", c.checkpoint_every);
  NNLAB_CHECK(c.checkpoint_every == 0 || !c.checkpoint_dir.empty(), "--checkpoint-every needs --checkpoint-dir DIR");
  NNLAB_CHECK(std::isfinite(c.val_split) && c.val_split >= 0 && c.val_split < 1,
              "--val-split must be a fraction in [0, 1), got ", c.val_split);
  NNLAB_CHECK(c.crop_padding >= 0, "--crop-padding must be >= 0, got ", c.crop_padding);
  NNLAB_CHECK(c.normalize == "none" || c.normalize == "dataset", "--normalize '", c.normalize,
              "' is not known; choose none or dataset");
  NNLAB_CHECK(c.schedule == "none" || c.schedule == "step" || c.schedule == "cosine" ||
                  c.schedule == "warmup-cosine" || c.schedule == "onecycle",
              "--schedule '", c.schedule, "' is not known; choose none, step, cosine, warmup-cosine or onecycle");
  parse_cuda_math(c.math, "--math");
  precision_storage_dtype(c.precision, "--precision");
  NNLAB_CHECK(c.precision != "tf32" || c.math == "fp32" || c.math == "tf32", "--precision tf32 is --math tf32; it ",
              "cannot go with --math ", c.math);
  if (c.precision == "tf32") c.math = "tf32";
  NNLAB_CHECK(c.denormals == "flush" || c.denormals == "keep", "--denormals '", c.denormals,
              "' is not known; choose flush or keep");
  NNLAB_CHECK(c.threads >= 0, "--threads must be >= 0 (0 = all cores), got ", c.threads);
  NNLAB_CHECK(c.batch_slices >= 1 && c.batch_slices <= 4096, "--batch-slices must be between 1 and 4096, got ",
              c.batch_slices);
  check_finite_non_negative("--lr", c.optimizer.lr);
  check_finite_non_negative("--momentum", c.optimizer.momentum);
  // A velocity that never decays (momentum 1) or grows each step (above 1) diverges.
  NNLAB_CHECK(c.optimizer.momentum < 1, "--momentum must lie in [0, 1), got ", c.optimizer.momentum,
              " (0.9 is usual)");
  check_finite_non_negative("--weight-decay", c.optimizer.weight_decay);
  NNLAB_CHECK(!c.optimizer.nesterov || c.optimizer.name == "sgd", "--nesterov applies to --optimizer sgd only");
  NNLAB_CHECK(!c.optimizer.nesterov || c.optimizer.momentum > 0, "--nesterov needs --momentum > 0");
  if (!c.betas.empty()) {
    const auto comma = c.betas.find(',');
    NNLAB_CHECK(comma != std::string::npos, "--betas must be two numbers B1,B2, got '", c.betas, "'");
    try {
      size_t used1 = 0, used2 = 0;
      const std::string s1 = c.betas.substr(0, comma), s2 = c.betas.substr(comma + 1);
      c.optimizer.beta1 = std::stod(s1, &used1);
      c.optimizer.beta2 = std::stod(s2, &used2);
      NNLAB_CHECK(used1 == s1.size() && used2 == s2.size(), "trailing characters");
    } catch (const std::exception&) {
      fail("--betas must be two numbers B1,B2, got '", c.betas, "'");
    }
    NNLAB_CHECK(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1 && c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1,
                "--betas must both lie in [0, 1), got ", c.betas);
  }
}

}  // namespace nnlab
