// The environment of a run, recorded once in the "run" record of --metrics: the machine
// (CPU, threads, OpenBLAS build, GPU, driver, CUDA runtime, cuBLAS, cuDNN), nnlab's version
// and commit, the math mode, the full configuration and the seed — enough to tell two
// records apart and to repeat a run.
#pragma once
#include <nlohmann/json.hpp>

#include "apps/train_config.h"
#include "core/device.h"

namespace nnlab {

// Version and git commit the CLI was built from ("unknown" outside a git checkout).
const char* nnlab_version();
const char* nnlab_commit();

// Every field of the configuration, as given after recipe defaults were filled in.
nlohmann::json config_record(const TrainConfig& config);

// device: the device the run trains on.
nlohmann::json environment_record(const TrainConfig& config, Device device);

}  // namespace nnlab
