// Everything `nnlab train` can be told, with the zoo recipe filling what the user left out.
#pragma once
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "layers/model_file.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"

namespace nnlab {

struct TrainConfig {
  std::string data = "";          // fashion-mnist | mnist | cifar10 ("" = the model's recipe)
  std::string data_dir;           // "" = the data set's default folder
  std::string model = "mlp";       // a zoo name; after finalize, the name of model_spec
  std::string model_file;         // --model-file: the user's own model file ("" = the zoo's --model)
  ModelFile model_spec;           // after finalize: the network and its recipe, read from either
  int64_t epochs = 5;
  int64_t batch = 0;              // 0 = the recipe's
  OptimizerConfig optimizer;      // name "" = the recipe's
  std::string betas;              // "B1,B2"
  std::string schedule = "none";   // none | step | cosine | warmup-cosine | onecycle
  ScheduleOptions schedule_options;  // its lr is the optimizer's
  double clip_grad_norm = 0;         // 0 = no clipping
  int64_t crop_padding = 0;          // augmentation: random crop after zero padding
  bool hflip = false;                // augmentation: random horizontal flip
  std::string normalize = "none";    // none | dataset (per-channel mean/std of the training set)
  uint64_t seed = 0;
  int threads = 0;                // 0 = all cores
  int batch_slices = 1;           // CPU: the batch in this many slices, one thread each (apps/batch_slices.h)
  std::string denormals = "flush";  // CPU: flush (to zero, fast) | keep (IEEE gradual underflow); host_cpu.h
  std::string device = "cpu";
  std::string math = "fp32";        // fp32 (strict, the default) | tf32 | bf16 (CUDA tensor cores, recorded)
  // fp32 (the default) | tf32 (float32 tensors, --math tf32) | bf16 (bf16 activations and weight
  // copies, float32 master weights, optimizer state, BatchNorm statistics and loss: layers/precision.h)
  std::string precision = "fp32";
  bool deterministic = false;      // CUDA: deterministic cuDNN algorithms, no Winograd/FFT
  std::string conv_impl = "auto";   // auto (the device's own choice per layer) | reference | im2col | cudnn
  std::string gemm_impl = "cublas";  // CUDA: cublas | naive | tiled | registers (devices/gemm_impl.h)
  std::string reduce_impl = "auto";  // CUDA's Linear bias sum: auto | uncoalesced | coalesced | tree | shuffle
  int64_t test_images = 0;        // train: evaluate on the first N test images (0 = all)
  std::string cuda_graphs = "auto";  // train on CUDA: auto | on | off (apps/step_graph.h)
  std::string data_on_device = "auto";  // train on CUDA: auto | on | off (DataLoaderOptions::resident)
  bool warm_up = true;            // train on CUDA: one-off work before the first epoch's clock (Trainer::warm_up)
  int64_t log_interval = 100;     // steps between progress updates (and loss read-backs)
  int64_t max_steps = 0;          // stop after this many steps in all (0 = no limit)
  std::string metrics;            // JSON-lines file of run records ("" = none)
  int64_t metrics_every = 0;      // also one record per N steps (0 = per epoch only)
  std::string checkpoint_dir;     // DIR/last.safetensors every epoch, DIR/best.safetensors ("" = none)
  int64_t checkpoint_every = 0;   // also save DIR/last.safetensors every N steps (0 = per epoch only)
  double val_split = 0;           // fraction of the training set held out for validation (0 = none)
  std::string resume;             // checkpoint to continue from ("" = a fresh run)
  bool check_numerics = false;    // train: check every layer's output and gradient (synchronises)
  bool pace_stdin = false;        // train: wait for a line on stdin before each epoch (benchmark drivers)
  std::string allreduce = "step";  // train under mpirun: step | overlap (apps/distributed/grad_reducer.h)
  std::string allreduce_backend = "auto";  // train under mpirun: auto | nccl | mpi (apps/distributed/allreduce_backend.h)
};

// Registers the training options on a (sub)command.
void add_train_options(CLI::App& app, TrainConfig& config);
// One image's shape and the class count of a data set whose shape is fixed (fashion-mnist,
// mnist: 1×28×28; cifar10, synthetic-cifar10: 3×32×32; 10 classes); false for "folder".
bool fixed_input(const std::string& data, InputSpec& input);
// The input of a model's recipe data set, for commands that measure on a synthetic batch of
// its shape (`command`: "explain", "sweep"); an error when the data set has no fixed shape.
InputSpec recipe_input(const ModelFile& m, const char* command);

// Reads the model (--model-file, --model, or with --resume and neither, the model stored in
// the checkpoint), checks it against the data set's shape where that is fixed, fills recipe
// defaults for options the user did not give and validates the result; throws nnlab::Error
// with a message naming the option or the model file.
void finalize_train_config(const CLI::App& app, TrainConfig& config);

}  // namespace nnlab
