// Trainer's constructor: the options checked (on every rank together), the device, the data,
// the model with its epilogues fused, the optimizer, the loader, the non-finite guard, the
// schedule, data parallelism and the CUDA graph, in the order a failure should stop them: a
// bad folder or option before anything slow, the metrics file last.
#include <spdlog/spdlog.h>

#include <string>
#include <tuple>
#include <vector>

#include "apps/batch_slices.h"
#include "apps/environment.h"
#include "apps/trainer.h"
#include "devices/conv_impl.h"
#include "devices/gemm_impl.h"
#include "devices/host_cpu.h"
#include "devices/reduce_impl.h"
#include "devices/registry.h"
#include "layers/dropout.h"
#include "layers/fuse_epilogues.h"
#include "layers/precision.h"

namespace nnlab {

Trainer::Trainer(TrainConfig config) : config_(std::move(config)) {
  prepare_checkpoint_dir();  // before anything slow: a bad folder fails at once
  host_cpu::set_threads(config_.threads);
  host_cpu::set_flush_denormals(config_.denormals != "keep");
  std::string why;
  device_ = resolve_device(config_.device, &why);
  if (config_.device == "auto") spdlog::info("{}", why);
  device_ = rank_device(device_, config_.device, World::get());
  // The options' values, checked on every rank together: under mpirun a bad one is one
  // message from rank 0, not one per rank (and no MPI_Abort).
  AllReduceBackendRequest allreduce_backend{};
  ConvImpl requested_conv = ConvImpl::Auto;
  GemmImpl requested_gemm = GemmImpl::Cublas;
  ReduceImpl requested_reduce = ReduceImpl::Auto;
  World::get().agree([&] {
    allreduce_backend = parse_allreduce_backend(config_.allreduce_backend);
    NNLAB_CHECK(config_.math != "tf32" || device_.is_cuda(),
                "--math tf32 is a format of NVIDIA's tensor cores; on the CPU use fp32 (the default) or bf16");
    NNLAB_CHECK(config_.math != "bf16" || !device_.is_cpu() || host_cpu::bf16_available(),
                "--math bf16 cannot run on this CPU: ", host_cpu::bf16_unavailable_reason(),
                "; train in fp32 (the default), or use --math bf16 on a CUDA GPU");
    requested_conv = parse_conv_impl(config_.conv_impl);
    check_conv_impl(requested_conv, device_);
    requested_gemm = parse_gemm_impl(config_.gemm_impl);
    check_gemm_impl(requested_gemm, device_);
    requested_reduce = parse_reduce_impl(config_.reduce_impl);
    check_reduce_impl(requested_reduce, device_);
    graphs_mode_ = parse_cuda_graphs(config_.cuda_graphs);
    precision_storage_dtype(config_.precision, device_, "--precision");  // before any data is read
  });
  host_cpu::set_bf16_products(device_.is_cpu() && config_.math == "bf16");
  set_conv_impl(requested_conv);
  set_gemm_impl(requested_gemm);
  set_reduce_impl(requested_reduce);
  if (device_.is_cpu() && config_.threads == 0 && host_cpu::threads() >= 2) {
    ThreadGovernorOptions governor;
    governor.max_threads = config_max_threads_ = host_cpu::threads();
    governor.physical_cores = host_cpu::physical_cores();
    governor_ = std::make_unique<ThreadGovernor>(governor);
    host_cpu::set_threads(governor_->threads());
  }
  if (device_.is_cuda()) set_cuda_options({parse_cuda_math(config_.math, "--math"), config_.deterministic});
  train_ = load_dataset(config_.data, config_.data_dir, "train");
  test_ = load_dataset(config_.data, config_.data_dir, "test");
  NNLAB_CHECK(config_.test_images >= 0, "--test-images must be >= 0, got ", config_.test_images);
  test_ = first_samples(test_, config_.test_images);
  // The validation set comes out of the training set; the test set is never selected on.
  if (config_.val_split > 0) std::tie(train_, val_) = split_validation(train_, config_.val_split, config_.seed);
  const InputSpec input{train_.channels(), train_.height(), train_.width(), train_.classes};
  model_ = make_model(config_.model_spec, input, config_.seed);
  fuse_epilogues(*model_);
  model_->to(device_);
  model_->set_compute_dtype(precision_storage_dtype(config_.precision, device_, "--precision"));
  const World& world = World::get();
  if (world.distributed()) seed_dropout(*model_, rank_dropout_seed(config_.seed, world.rank()));
  optimizer_ = make_optimizer(config_.optimizer, model_->parameters());
  if (config_.normalize == "dataset") normalization_ = channel_statistics(train_);
  DataLoaderOptions opts;
  opts.batch_size = config_.batch;
  opts.seed = config_.seed;
  opts.device = device_;
  opts.normalize = normalization_;
  opts.augment = Augmentation{config_.crop_padding, config_.hflip};
  opts.part = world.rank();  // this rank's slice of every global batch
  opts.parts = world.size();
  opts.resident = use_data_on_device(config_, device_, train_, world.size());
  loader_ = std::make_unique<DataLoader>(train_, opts);
  if (opts.resident)
    spdlog::info("data on the device: the training set is on {} ({:.0f} MiB as {}), each batch gathered and "
                 "normalised there", device_.str(), static_cast<double>(train_.images.nbytes()) / (1 << 20),
                 dtype_name(train_.images.dtype()));
  std::vector<std::string> parameter_names;  // in the optimizer's order (Module::parameters)
  for (const auto& [name, p] : model_->named_parameters()) parameter_names.push_back(name);
  guard_ = std::make_unique<NonFiniteGuard>(device_, std::move(parameter_names), loader_->steps_per_epoch(),
                                            config_.epochs);
  optimizer_->set_skip_flag(guard_->flag());
  if (config_.check_numerics) numerics_ = std::make_unique<NumericsCheck>();
  ScheduleOptions sched = config_.schedule_options;
  sched.lr = config_.optimizer.lr;
  schedule_ = make_schedule(config_.schedule, sched, config_.epochs * loader_->steps_per_epoch(),
                            loader_->steps_per_epoch());
  if (world.distributed())
    // --check-numerics owns the engine's backward hook, which overlap needs; step gives the same sums.
    parallel_ = std::make_unique<DataParallel>(world, optimizer_->params(),
                                               parse_allreduce_mode(config_.check_numerics ? "step" : config_.allreduce),
                                               decide_allreduce_backend(world, device_, allreduce_backend));
  if (graphs_mode_ != CudaGraphs::Off) {
    const std::string obstacle = graph_obstacle(device_, config_.check_numerics, world.distributed());
    NNLAB_CHECK(obstacle.empty() || graphs_mode_ != CudaGraphs::On, "--cuda-graphs on: cannot record the step as a "
                "CUDA graph: ", obstacle, " (use --cuda-graphs auto or off)");
    if (obstacle.empty()) {
      graphed_ = std::make_unique<GraphedStep>(
          device_, [this](const Tensor& images, const Tensor& labels) { return forward_backward_for_graph(images, labels); });
      update_in_graph_ = config_.clip_grad_norm <= 0;
    }
    else if (device_.is_cuda())
      spdlog::info("CUDA graphs: off, {}", obstacle);
  }
  if (!config_.resume.empty()) resume_from(config_.resume);
  if (config_.batch_slices > 1) {
    const std::string obstacle = BatchSlices::obstacle(*model_, device_, config_.check_numerics, world.size());
    NNLAB_CHECK(obstacle.empty(), "--batch-slices ", config_.batch_slices, ": ", obstacle, " (use --batch-slices 1)");
    NNLAB_CHECK(config_.batch_slices <= config_.batch, "--batch-slices ", config_.batch_slices, " is more than the ",
                config_.batch, " samples of a batch (--batch): every slice needs one");
    slices_ = std::make_unique<BatchSlices>(config_.batch_slices, *model_, [&] {
      std::shared_ptr<Sequential> replica = make_model(config_.model_spec, input, config_.seed);
      fuse_epilogues(*replica);
      replica->set_compute_dtype(model_->compute_dtype());
      return replica;
    });
  }
  if (parallel_) parallel_->check_same_start(config_record(config_), *model_);
  // Ranks step in lockstep, so one rank's step time is mostly waiting for the others: the
  // thread governor would measure them, not its own cores. Each rank keeps its count.
  if (parallel_) governor_.reset();
  // Opened last: a run that cannot start leaves no metrics file behind. Rank 0 alone writes.
  if (!config_.metrics.empty() && world.is_root()) recorder_ = RunRecorder(config_.metrics);
}

}  // namespace nnlab
