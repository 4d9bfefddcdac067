// The trainer's checkpoints: the folder checked before training, the saves at the end of each
// epoch (and every --checkpoint-every steps), and --resume. The rest of Trainer: trainer.cpp.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include <spdlog/spdlog.h>

#include "apps/checkpoint.h"
#include "apps/distributed/world.h"
#include "apps/trainer.h"

namespace nnlab {

void Trainer::save_epoch_checkpoints(const EpochResult& r) {
  if (config_.checkpoint_dir.empty()) return;
  if (r.val_accuracy > best_val_accuracy_) {
    best_val_accuracy_ = r.val_accuracy;
    save_checkpoint(config_.checkpoint_dir + "/best.safetensors", r.epoch, r.steps_done, r.loss_sum);
    spdlog::info("new best validation accuracy {:.2f}%: saved {}/best.safetensors", 100.0 * r.val_accuracy,
                 config_.checkpoint_dir);
  }
  save_checkpoint(config_.checkpoint_dir + "/last.safetensors", r.epoch, r.steps_done, r.loss_sum);
}

void Trainer::save_checkpoint(const std::string& path, int64_t epoch, int64_t steps_done, double loss_sum) const {
  // Never replace a good checkpoint with the state of a run that went non-finite.
  stop_if_faulty(std::filesystem::exists(path) ? "; nothing was saved, so " + path + " still holds the last good state."
                                               : "; nothing was saved.");
  if (!World::get().is_root()) return;  // every rank holds the same weights; rank 0 writes them
  CheckpointInfo info;
  info.model = config_.model;
  info.model_file = config_.model_spec.text;
  info.input = InputSpec{train_.channels(), train_.height(), train_.width(), train_.classes};
  info.normalization = normalization_;
  info.class_names = train_.class_names;
  TrainingState state;
  state.epoch = epoch;
  state.step_in_epoch = steps_done;
  state.global_step = global_step_;
  state.epoch_loss_sum = loss_sum;
  state.best_val_accuracy = best_val_accuracy_;
  nnlab::save_checkpoint(path, info, *model_, *optimizer_, config_, state);
}

// Creates the folder and proves it writable with a probe file, so a bad --checkpoint-dir
// fails before any training rather than at the first save.
void Trainer::prepare_checkpoint_dir() const {
  const std::string& dir = config_.checkpoint_dir;
  if (dir.empty() || !World::get().is_root()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  NNLAB_CHECK(!ec && std::filesystem::is_directory(dir), "--checkpoint-dir ", dir, " cannot be created: ",
              ec ? ec.message() : "not a directory", "; choose a folder you can write to");
  const std::string probe = dir + "/.nnlab-write-test-" + std::to_string(getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  NNLAB_CHECK(f, "--checkpoint-dir ", dir, " is not writable (", std::strerror(errno),
              "); choose a folder you can write to");
  std::fclose(f);
  std::remove(probe.c_str());
}

void Trainer::resume_from(const std::string& path) {
  CheckpointInfo info;
  const SafetensorsFile file = read_checkpoint(path, &info);
  NNLAB_CHECK(info.model == config_.model, "checkpoint ", path, " was saved from model ", info.model,
              ", not --model ", config_.model, "; resume with --model ", info.model);
  check_same_model(info, path, config_.model_spec);
  // Options that change what the continued run computes must be those of the first run.
  const auto saved = nlohmann::json::parse(info.metadata.at("config"));
  const std::vector<std::tuple<const char*, nlohmann::json, nlohmann::json>> same = {
      {"--data", saved.value("data", ""), config_.data},
      {"--batch", saved.value("batch", 0), config_.batch},
      {"--seed", saved.value("seed", uint64_t{0}), config_.seed},
      {"--optimizer", saved["optimizer"].value("name", ""), config_.optimizer.name},
      {"--val-split", saved.value("val_split", 0.0), config_.val_split},
      {"--precision", saved.value("precision", "fp32"), config_.precision}};
  for (const auto& [option, then, now] : same)
    NNLAB_CHECK(then == now, "checkpoint ", path, " was saved by a run with ", option, " ", then.dump(), ", not ",
                now.dump(), "; resume with the options of the first run");
  load_model_tensors(file, path, info.model, *model_, config_.model);
  const TrainingState s = load_training_state(file, path, *model_, *optimizer_);
  global_step_ = s.global_step;
  best_val_accuracy_ = s.best_val_accuracy;
  const bool epoch_done = s.step_in_epoch >= loader_->steps_per_epoch();
  start_epoch_ = epoch_done ? s.epoch + 1 : s.epoch;
  start_step_ = epoch_done ? 0 : s.step_in_epoch;
  start_loss_sum_ = epoch_done ? 0.0 : s.epoch_loss_sum;
  spdlog::info("resuming from {}: epoch {}, step {} of it ({} steps in all)", path, start_epoch_, start_step_,
               global_step_);
}

}  // namespace nnlab
