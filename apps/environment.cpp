#include "apps/environment.h"

#include "devices/host_cpu.h"
#include "devices/registry.h"

// The commit comes from the header the build regenerates (scripts/commit_header.cmake), the
// version from a compile definition of the nnlab_cli target (CMakeLists.txt); the fallbacks
// keep the file compiling in another build.
#if __has_include("nnlab_commit.h")
#include "nnlab_commit.h"
#endif
#ifndef NNLAB_GIT_COMMIT
#define NNLAB_GIT_COMMIT "unknown"
#endif
#ifndef NNLAB_VERSION
#define NNLAB_VERSION "unknown"
#endif

namespace nnlab {

const char* nnlab_version() { return NNLAB_VERSION; }
const char* nnlab_commit() { return NNLAB_GIT_COMMIT; }

nlohmann::json config_record(const TrainConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  const ScheduleOptions& s = c.schedule_options;
  return {{"data", c.data},
          {"data_dir", c.data_dir},
          {"model", c.model},
          {"epochs", c.epochs},
          {"batch", c.batch},
          {"optimizer",
           {{"name", o.name},
            {"lr", o.lr},
            {"momentum", o.momentum},
            {"nesterov", o.nesterov},
            {"weight_decay", o.weight_decay},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"eps", o.eps}}},
          {"schedule",
           {{"name", c.schedule},
            {"step_epochs", s.step_epochs},
            {"gamma", s.gamma},
            {"min_lr", s.min_lr},
            {"warmup_steps", s.warmup_steps},
            {"warmup_start_factor", s.warmup_start_factor}}},
          {"clip_grad_norm", c.clip_grad_norm},
          {"crop_padding", c.crop_padding},
          {"hflip", c.hflip},
          {"normalize", c.normalize},
          {"seed", c.seed},
          {"threads", c.threads},
          {"device", c.device},
          {"precision", c.precision},
          {"gemm_impl", c.gemm_impl},
          {"reduce_impl", c.reduce_impl},
          {"log_interval", c.log_interval},
          {"max_steps", c.max_steps},
          {"metrics", c.metrics},
          {"metrics_every", c.metrics_every},
          {"checkpoint_dir", c.checkpoint_dir},
          {"checkpoint_every", c.checkpoint_every},
          {"val_split", c.val_split},
          {"resume", c.resume},
          {"check_numerics", c.check_numerics},
          {"cuda_graphs", c.cuda_graphs},
          {"data_on_device", c.data_on_device},
          {"warm_up", c.warm_up},
          {"test_images", c.test_images}};
}

namespace {

// GPU, driver, runtime, cuBLAS and cuDNN: the backend's report (one paragraph per GPU),
// plus the math mode. A CPU run that has not loaded the CUDA backend does not load it just
// to describe it (registry.h): it records that the GPU was not probed.
nlohmann::json gpu_record(Device device) {
  nlohmann::json gpu;
  gpu["built_with_cuda"] = built_with_cuda();
  gpu["simulator"] = cuda_simulated();
  gpu["probed"] = device.is_cuda() || cuda_loaded();
  if (!gpu["probed"].get<bool>()) return gpu;
  const CudaStatus status = cuda_status();
  gpu["usable"] = status.usable;
  gpu["device_count"] = status.device_count;
  if (!status.usable) gpu["reason"] = status.reason;
  if (status.usable) gpu["report"] = cuda_report();
  const CudaOptions options = cuda_options();
  gpu["math_mode"] = options.math == CudaMath::Fp32 ? "strict-fp32" : cuda_math_name(options.math);
  gpu["deterministic"] = options.deterministic;
  return gpu;
}

// The core of kernels OpenBLAS runs against what the CPU could run, and what nnlab did about
// it (devices/host_cpu.h): an old core makes every product several times slower.
nlohmann::json openblas_core_record() {
  const host_cpu::OpenblasCore s = host_cpu::openblas_core();
  nlohmann::json record = {{"core", s.core},
                           {"instructions", s.instructions},
                           {"cpu", s.cpu},
                           {"best", s.best},
                           {"forced", s.forced},
                           {"older", s.older},
                           {"action", s.action},
                           {"summary", s.summary}};
  if (!s.before.empty()) record["before"] = s.before;
  return record;
}

}  // namespace

nlohmann::json environment_record(const TrainConfig& config, Device device) {
  nlohmann::json env;
  env["nnlab_version"] = nnlab_version();
  env["commit"] = nnlab_commit();
  env["cpu"] = {{"model", host_cpu::model_name()}, {"cores", host_cpu::cores()}, {"threads", host_cpu::threads()},
                {"denormals", host_cpu::denormals_mode()},
                // nnlab's own kernels: "avx512" or "avx2", and "auto" or why not (host_cpu.h)
                {"kernels", host_cpu::kernel_isa()}, {"kernels_chosen", host_cpu::kernel_isa_reason()}};
  env["openblas"] = host_cpu::openblas_build();
  env["openblas_core"] = openblas_core_record();
  env["device"] = device.str();
  env["gpu"] = gpu_record(device);
  // strict float32 (no -ffast-math) unless the run opted into TF32 or bf16 (CUDA) or bf16 products (CPU).
  std::string math = "strict-fp32";
  if (device.is_cuda() && cuda_options().math != CudaMath::Fp32) math = cuda_math_name(cuda_options().math);
  if (device.is_cpu() && host_cpu::bf16_products()) math = "bf16";
  env["math_mode"] = math;
  // bf16: activations and weight copies stored in bf16 (layers/precision.h); else float32.
  env["precision"] = config.precision == "bf16" ? "bf16" : "fp32";
  env["seed"] = config.seed;
  env["config"] = config_record(config);
  return env;
}

}  // namespace nnlab
