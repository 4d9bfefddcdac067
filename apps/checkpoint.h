// Training checkpoints: one safetensors file (core/serialization.h) holding
//   tensors    the model's parameters and buffers under PyTorch's names ("fc1.weight",
//              "bn1.running_mean", ...), so PyTorch's load_state_dict takes them as they are,
//              and the optimizer's state as "optimizer.<parameter index>.<name>"
//              ("optimizer.0.momentum_buffer", "optimizer.3.exp_avg", ...)
//   metadata   JSON strings: format and version, model, the model file (its text, so the
//              checkpoint needs nothing else to rebuild the network), input spec, class names,
//              normalisation, the full TrainConfig, where the run stands (epoch, step within
//              it, global step, optimizer and Adam per-parameter steps, Dropout step counters,
//              the epoch's running loss sum, best validation accuracy) and the nnlab version.
// With these and the pure functions of the step (schedule, data order, Dropout masks), a
// resumed CPU run repeats the uninterrupted one bit for bit.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/train_config.h"
#include "core/serialization.h"
#include "datasets/dataloader.h"
#include "layers/zoo.h"
#include "optim/optimizer.h"

namespace nnlab {

struct CheckpointInfo {
  std::string model;
  std::string model_file;  // the model file's text; "" in checkpoints written before model files (zoo models)
  InputSpec input;
  Normalization normalization;
  std::vector<std::string> class_names;
  std::map<std::string, std::string> metadata;  // everything, as stored
};

// Where a training run stands when it is saved.
struct TrainingState {
  int64_t epoch = 1;           // the epoch in progress (1-based)
  int64_t step_in_epoch = 0;   // steps of it already taken
  int64_t global_step = 0;     // steps taken in all
  double epoch_loss_sum = 0;   // sum of this epoch's step losses so far (float32 on the device)
  double best_val_accuracy = -1;  // -1 = no validation yet
};

// Saves the whole training state atomically to `path`.
void save_checkpoint(const std::string& path, const CheckpointInfo& info, const Module& model,
                     const Optimizer& optimizer, const TrainConfig& config, const TrainingState& state);

// Reads `path` and checks it is an nnlab checkpoint; fills `info` from its metadata.
SafetensorsFile read_checkpoint(const std::string& path, CheckpointInfo* info);

// Copies the checkpoint's parameters and buffers into `model` (any device). Every tensor must
// be present with the model's shape and no other model tensor may be in the file; otherwise
// "checkpoint X was saved from model Y; tensor fc1.weight has shape [..] but model cnn
// expects [..]".
void load_model_tensors(const SafetensorsFile& file, const std::string& path, const std::string& saved_model,
                        Module& model, const std::string& model_name);

// Restores the optimizer, Dropout step counters and the run's position for --resume.
TrainingState load_training_state(const SafetensorsFile& file, const std::string& path, Module& model,
                                  Optimizer& optimizer);

// The model a checkpoint was saved from: its stored model file, or for a checkpoint older than
// model files, the zoo's file of the model it names.
ModelFile checkpoint_model(const CheckpointInfo& info, const std::string& path);
// The same, reading `path` first (for --resume without --model or --model-file).
ModelFile checkpoint_model_file(const std::string& path);
// Throws when `model` is not the network the checkpoint was saved from (a different layer list).
void check_same_model(const CheckpointInfo& info, const std::string& path, const ModelFile& model);

// Builds the model the checkpoint was saved from (checkpoint_model), loads its weights and buffers, moves it to
// `device`. `info` (optional) receives the checkpoint's description.
std::shared_ptr<Sequential> load_model_from_checkpoint(const std::string& path, Device device, CheckpointInfo* info);

}  // namespace nnlab
