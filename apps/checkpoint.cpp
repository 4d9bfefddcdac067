#include "apps/checkpoint.h"

#include <nlohmann/json.hpp>

#include "layers/dropout.h"
#include "layers/fuse_epilogues.h"
#include "layers/precision.h"

#ifndef NNLAB_VERSION
#define NNLAB_VERSION "0.1.0"
#endif

namespace nnlab {

namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "nnlab-checkpoint";
constexpr const char* kFormatVersion = "1";
const std::string kOptimizerPrefix = "optimizer.";

Json config_json(const TrainConfig& c) {
  const auto& o = c.optimizer;
  const auto& s = c.schedule_options;
  return {{"data", c.data}, {"data_dir", c.data_dir}, {"model", c.model}, {"epochs", c.epochs}, {"batch", c.batch},
          {"optimizer", {{"name", o.name}, {"lr", o.lr}, {"momentum", o.momentum}, {"nesterov", o.nesterov},
                         {"weight_decay", o.weight_decay}, {"beta1", o.beta1}, {"beta2", o.beta2}}},
          {"schedule", c.schedule},
          {"schedule_options", {{"step_epochs", s.step_epochs}, {"gamma", s.gamma}, {"min_lr", s.min_lr},
                                {"warmup_steps", s.warmup_steps}}},
          {"clip_grad_norm", c.clip_grad_norm}, {"crop_padding", c.crop_padding}, {"hflip", c.hflip},
          {"normalize", c.normalize}, {"seed", c.seed}, {"threads", c.threads}, {"device", c.device},
          {"precision", c.precision}, {"max_steps", c.max_steps}, {"checkpoint_every", c.checkpoint_every}, {"val_split", c.val_split}};
}

// A metadata entry parsed as JSON, with a clear error when it is missing or damaged.
Json meta_json(const std::map<std::string, std::string>& meta, const std::string& path, const std::string& key) {
  const auto it = meta.find(key);
  NNLAB_CHECK(it != meta.end(), "checkpoint ", path, " lacks metadata '", key,
              "'; it was not written by this version of nnlab's trainer");
  try {
    return Json::parse(it->second);
  } catch (const Json::exception&) {
    fail("checkpoint ", path, " has corrupt metadata '", key, "': ", it->second);
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointInfo& info, const Module& model,
                     const Optimizer& optimizer, const TrainConfig& config, const TrainingState& state) {
  std::vector<std::pair<std::string, Tensor>> tensors = model.named_parameters();
  for (auto& b : model.named_buffers()) tensors.push_back(std::move(b));
  for (auto& [key, t] : optimizer.state()) tensors.emplace_back(kOptimizerPrefix + key, t);

  const std::vector<Dropout*> dropouts = dropout_layers(model);
  Json dropout_steps = Json::array();
  for (const Dropout* d : dropouts) dropout_steps.push_back(d->step());
  Json adam_steps = Json::array();
  if (const auto* adam = dynamic_cast<const Adam*>(&optimizer)) adam_steps = adam->param_steps();

  const Json training = {{"epoch", state.epoch},
                         {"step_in_epoch", state.step_in_epoch},
                         {"global_step", state.global_step},
                         {"optimizer_steps", optimizer.steps_taken()},
                         {"adam_param_steps", adam_steps},
                         {"dropout_steps", dropout_steps},
                         {"epoch_loss_sum", state.epoch_loss_sum},
                         {"best_val_accuracy", state.best_val_accuracy}};
  const InputSpec& in = info.input;
  const std::map<std::string, std::string> meta = {
      {"format", kFormat},
      {"format_version", kFormatVersion},
      {"nnlab_version", NNLAB_VERSION},
      {"model", info.model},
      {"model_file", info.model_file},
      {"input", Json{{"channels", in.channels}, {"height", in.height}, {"width", in.width}, {"classes", in.classes}}
                    .dump()},
      {"class_names", Json(info.class_names).dump()},
      {"normalization", Json{{"mean", info.normalization.mean}, {"std", info.normalization.std}}.dump()},
      {"config", config_json(config).dump()},
      {"training", training.dump()}};
  save_safetensors(path, tensors, meta);
}

SafetensorsFile read_checkpoint(const std::string& path, CheckpointInfo* info) {
  SafetensorsFile file = load_safetensors(path);
  const auto& meta = file.metadata;
  const auto format = meta.find("format");
  NNLAB_CHECK(format != meta.end() && format->second == kFormat, "checkpoint ", path,
              " is a safetensors file but not an nnlab checkpoint (no format metadata '", kFormat, "')");
  NNLAB_CHECK(meta.count("format_version") && meta.at("format_version") == kFormatVersion, "checkpoint ", path,
              " has format version ", meta.count("format_version") ? meta.at("format_version") : "?",
              "; this nnlab reads version ", kFormatVersion);
  if (!info) return file;
  CheckpointInfo& out = *info;
  out.metadata = meta;
  NNLAB_CHECK(meta.count("model"), "checkpoint ", path, " lacks metadata 'model'");
  out.model = meta.at("model");
  if (meta.count("model_file")) out.model_file = meta.at("model_file");
  try {
    const Json in = meta_json(meta, path, "input");
    out.input = InputSpec{in.at("channels").get<int64_t>(), in.at("height").get<int64_t>(),
                          in.at("width").get<int64_t>(), in.at("classes").get<int64_t>()};
    out.class_names = meta_json(meta, path, "class_names").get<std::vector<std::string>>();
    const Json norm = meta_json(meta, path, "normalization");
    out.normalization.mean = norm.at("mean").get<std::vector<float>>();
    out.normalization.std = norm.at("std").get<std::vector<float>>();
  } catch (const Json::exception& e) {
    fail("checkpoint ", path, " has corrupt metadata (", e.what(), ")");
  }
  return file;
}

void load_model_tensors(const SafetensorsFile& file, const std::string& path, const std::string& saved_model,
                        Module& model, const std::string& model_name) {
  const std::string from = "checkpoint " + path + " was saved from model " + saved_model + "; ";
  std::vector<std::pair<std::string, Tensor>> wanted = model.named_parameters();
  for (auto& b : model.named_buffers()) wanted.push_back(std::move(b));
  for (auto& [name, t] : wanted) {
    NNLAB_CHECK(file.contains(name), from, "it has no tensor ", name, ", which model ", model_name, " needs");
    const Tensor& src = file.at(name);
    NNLAB_CHECK(src.shape() == t.shape(), from, "tensor ", name, " has shape ", shape_str(src.shape()),
                " but model ", model_name, " expects ", shape_str(t.shape()));
    t.copy_(src.dtype() == t.dtype() ? src : src.to(t.dtype()));
  }
  for (const auto& [name, t] : file.tensors) {
    if (name.compare(0, kOptimizerPrefix.size(), kOptimizerPrefix) == 0) continue;
    bool known = false;
    for (const auto& w : wanted) known = known || w.first == name;
    NNLAB_CHECK(known, from, "its tensor ", name, " is not part of model ", model_name);
  }
}

TrainingState load_training_state(const SafetensorsFile& file, const std::string& path, Module& model,
                                  Optimizer& optimizer) {
  std::vector<std::pair<std::string, Tensor>> opt_state;
  for (const auto& [name, t] : file.tensors)
    if (name.compare(0, kOptimizerPrefix.size(), kOptimizerPrefix) == 0)
      opt_state.emplace_back(name.substr(kOptimizerPrefix.size()), t);
  TrainingState s;
  try {
    optimizer.load_state(opt_state);
    const Json t = meta_json(file.metadata, path, "training");
    s.epoch = t.at("epoch").get<int64_t>();
    s.step_in_epoch = t.at("step_in_epoch").get<int64_t>();
    s.global_step = t.at("global_step").get<int64_t>();
    s.epoch_loss_sum = t.at("epoch_loss_sum").get<double>();
    s.best_val_accuracy = t.at("best_val_accuracy").get<double>();
    optimizer.set_steps_taken(t.at("optimizer_steps").get<int64_t>());
    if (auto* adam = dynamic_cast<Adam*>(&optimizer)) adam->set_param_steps(t.at("adam_param_steps"));
    const std::vector<Dropout*> dropouts = dropout_layers(model);
    const auto steps = t.at("dropout_steps").get<std::vector<uint64_t>>();
    NNLAB_CHECK(steps.size() == dropouts.size(), "it holds ", steps.size(), " Dropout step counters for ",
                dropouts.size(), " Dropout layers");
    for (size_t i = 0; i < steps.size(); ++i) dropouts[i]->set_step(steps[i]);
  } catch (const Json::exception& e) {
    fail("checkpoint ", path, " has corrupt training metadata (", e.what(), ")");
  } catch (const Error& e) {
    fail("cannot resume from checkpoint ", path, ": ", e.what());
  }
  NNLAB_CHECK(s.epoch >= 1 && s.step_in_epoch >= 0 && s.global_step >= 0, "checkpoint ", path,
              " has an impossible training position (epoch ", s.epoch, ", step ", s.step_in_epoch, ")");
  return s;
}

ModelFile checkpoint_model(const CheckpointInfo& info, const std::string& path) {
  if (info.model_file.empty()) return model_info(info.model);  // saved before checkpoints carried the file
  return parse_model_file(info.model_file, "the model file stored in checkpoint " + path, info.model);
}

ModelFile checkpoint_model_file(const std::string& path) {
  CheckpointInfo info;
  read_checkpoint(path, &info);
  return checkpoint_model(info, path);
}

void check_same_model(const CheckpointInfo& info, const std::string& path, const ModelFile& model) {
  const ModelFile saved = checkpoint_model(info, path);
  NNLAB_CHECK(Json::parse(saved.text).at("layers") == Json::parse(model.text).at("layers"), "checkpoint ", path,
              " was saved from model ", info.model, ", whose layers differ from those of ", model.origin,
              "; resume without --model and --model-file to use the checkpoint's own model");
}

std::shared_ptr<Sequential> load_model_from_checkpoint(const std::string& path, Device device, CheckpointInfo* info) {
  CheckpointInfo local;
  CheckpointInfo& ci = info ? *info : local;
  const SafetensorsFile file = read_checkpoint(path, &ci);
  std::shared_ptr<Sequential> model = make_model(checkpoint_model(ci, path), ci.input, 0);
  load_model_tensors(file, path, ci.model, *model, ci.model);
  fuse_epilogues(*model);
  model->to(device);
  // It computes as it was trained: a --precision bf16 run's checkpoint evaluates in bf16, so eval
  // repeats the run's test accuracy (a checkpoint from before --precision is float32's).
  const auto config = nlohmann::json::parse(ci.metadata.at("config"));
  const std::string precision = config.value("precision", "fp32");
  model->set_compute_dtype(precision_storage_dtype(precision, device, "the checkpoint's precision"));
  return model;
}

}  // namespace nnlab
