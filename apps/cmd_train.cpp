// nnlab train: train a zoo model on a data set.
#include <cstdio>
#include <memory>

#include "apps/commands.h"
#include "apps/train_report.h"
#include "apps/distributed/world.h"
#include "apps/run_variant.h"
#include "apps/trainer.h"

namespace nnlab {

void register_train_command(CLI::App& app) {
  auto config = std::make_shared<TrainConfig>();
  auto report = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("train", "Train a model from the zoo on a data set");
  add_train_options(*sub, *config);
  // Only train takes these here: compare has its own per-variant --conv-impl and --gemm-impl.
  sub->add_option("--conv-impl", config->conv_impl,
                  "Convolution kernels: auto (the device's own choice per layer; `nnlab explain` names it), reference "
                  "(readable direct loops), im2col (CPU) or cudnn (CUDA)")
      ->capture_default_str();
  sub->add_option("--gemm-impl", config->gemm_impl, kGemmImplHelp)->capture_default_str();
  sub->add_option("--reduce-impl", config->reduce_impl, kReduceImplHelp)->capture_default_str();
  sub->add_option("--cuda-graphs", config->cuda_graphs,
                  "CUDA: record each full batch's step (forward, backward, checks, optimizer update) once as a CUDA graph "
                  "and replay it (one launch instead of one per kernel, same results): auto (where the run allows: no "
                  "--check-numerics, one process), on (an error where it cannot), off")
      ->capture_default_str();
  sub->add_option("--data-on-device", config->data_on_device,
                  "CUDA: keep the whole training set on the GPU (uploaded once, as stored) and build each batch "
                  "there, no host copy per step (crops, flips and the normalisation too): auto (one process, and the "
                  "set takes at most 2 GiB), on (an error where it cannot), off")
      ->capture_default_str();
  sub->add_flag("--no-warm-up{false}", config->warm_up,
               "CUDA: leave the one-off work (library start-up, cuDNN's algorithm search) inside the first epoch's "
               "time instead of doing it before the clock, on a batch of zeros");
  sub->add_option("--test-images", config->test_images,
                  "Evaluate on the first N test images (0 = all; the accuracy is then of those N only)")
      ->capture_default_str();
  // Train only: compare and sweep measure steps, which this slows down.
  sub->add_flag("--check-numerics", config->check_numerics,
                "Check every layer's output and gradient at every step and stop at the first that is NaN or "
                "infinite, naming the layer (slow: waits for the device after every layer)");
  // Train only: lets scripts/bench.py --interleave alternate nnlab and PyTorch epoch by epoch,
  // so both see the same state of a machine whose speed drifts.
  sub->add_flag("--pace-stdin", config->pace_stdin,
                "Before each epoch print 'ready for epoch N' and wait for a line on standard input (for "
                "benchmark drivers that alternate two programs epoch by epoch)");
  sub->add_option("--report", *report,
                  "When the run ends, write an HTML report of it (curves, time per phase, configuration; as `nnlab "
                  "report` draws from --metrics records) to this file");
  sub->add_option("--allreduce", config->allreduce,
                  "Under mpirun: how gradients are summed over the ranks: step (one all-reduce after backward) or "
                  "overlap (buckets reduced while backward runs); docs/distributed.md")
      ->capture_default_str();
  sub->add_option("--allreduce-backend", config->allreduce_backend,
                  "Under mpirun: which library sums the gradients: auto (NCCL on GPU memory when the model is on CUDA, "
                  "nnlab has NCCL and every rank has a GPU of its own; else MPI), nccl or mpi (MPI on host memory, "
                  "CUDA gradients staged through it); docs/distributed.md")
      ->capture_default_str();
  add_command(sub, [sub, config, report] {
    // Under mpirun, rank 0 alone prints and writes the report; the others keep stderr for their own errors.
    const bool root = World::get().is_root();
    if (!root) std::freopen("/dev/null", "w", stdout);
    TrainReport train_report(root ? *report : std::string(), *config);  // first: it may give --metrics-every its --metrics
    finalize_train_config(*sub, *config);
    Trainer trainer(*config);
    train_report.around([&trainer] { trainer.run(); });
    // Stopped by a signal (after saving, with --checkpoint-dir): the shell's 128 + signal.
    return trainer.interrupted_signal() ? 128 + trainer.interrupted_signal() : 0;
  });
}

}  // namespace nnlab
