// CUDA graphs (devices/cuda/graph_cuda.cpp, apps/step_graph.h): a capture runs nothing and
// records what the work queued; a replay runs exactly that, with the capture's addresses and
// scalar arguments; what a graph cannot hold (a synchronisation, a read-back, an upload) is
// refused with a message; the memory a graph uses is its own; and `nnlab train` with graphs
// gives eager mode's losses, step for step, bit for bit. On the simulator all of it runs in CI.
#include "gpu/gpu_support.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

float first_value(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>()[0]; }

// The tensors of a checkpoint, as bytes: a safetensors file is an 8-byte header length, a
// JSON header (which names the run's options, different between modes), then the tensor data.
std::string checkpoint_tensor_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(file.size() >= 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(file[size_t(i)]);
  REQUIRE(8 + header <= file.size());
  return file.substr(8 + header);
}

// One 6-step `nnlab train --device cuda --deterministic` run per mode (extra options) with
// `args`, each run's output checked to name what the mode turns on; then every mode's losses
// must equal the first mode's, step for step, bit for bit, and so must its test accuracy and
// the tensors of its last checkpoint. --deterministic because cuDNN's algorithms are otherwise
// chosen by timing: two runs may choose differently, and two algorithms' sums differ in the
// last bit (in CI, the cnn's losses once parted at step 6).
// Batches of 8: what is under test is each mode's mechanism, which any batch shows, and on
// the simulator under the sanitizers a step costs in proportion to its batch.
void require_losses_equal_across_modes(const std::string& args, const std::vector<std::string>& modes) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnlab_graphs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::vector<double>> losses;
  std::vector<std::string> accuracies, states;
  for (size_t m = 0; m < modes.size(); ++m) {
    const std::string metrics = (dir / (std::to_string(m) + ".jsonl")).string();
    const fs::path checkpoints = dir / std::to_string(m);
    const nnlab_test::CliResult r =
        nnlab_test::run_cli("train --device cuda --deterministic --batch 8 --max-steps 6 --epochs 1 --test-images 64 "
                            "--metrics-every 1 --metrics " +
                            metrics + " --checkpoint-dir " + checkpoints.string() + " " + args + " " + modes[m]);
    INFO(args << " " << modes[m] << ": " << r.output);
    REQUIRE(r.exit_code == 0);
    if (modes[m].find("--cuda-graphs on") != std::string::npos) CHECK_THAT(r.output, Catch::Contains("CUDA graphs: on"));
    if (modes[m].find("--data-on-device on") != std::string::npos)
      CHECK_THAT(r.output, Catch::Contains("data on the device"));
    if (modes[m].find("--no-warm-up") == std::string::npos) CHECK_THAT(r.output, Catch::Contains("warm-up: "));
    losses.push_back(nnlab_test::step_losses(metrics));
    REQUIRE(losses.back().size() == 6);
    // The test accuracy reads BatchNorm's running statistics: they must agree as well.
    const size_t at = r.output.find("final test accuracy");
    REQUIRE(at != std::string::npos);
    accuracies.push_back(r.output.substr(at, r.output.find('\n', at) - at));
    states.push_back(checkpoint_tensor_bytes((checkpoints / "last.safetensors").string()));
  }
  fs::remove_all(dir);
  for (size_t m = 1; m < modes.size(); ++m)
    for (size_t i = 0; i < 6; ++i) {
      INFO(args << " step " << i + 1 << ": " << modes[0] << " " << losses[0][i] << ", " << modes[m] << " "
                << losses[m][i]);
      CHECK(losses[m][i] == losses[0][i]);
    }
  for (size_t m = 1; m < modes.size(); ++m) {
    INFO(modes[0] << " against " << modes[m]);
    CHECK(accuracies[m] == accuracies[0]);
    CHECK(states[m] == states[0]);  // weights, optimizer state, BatchNorm's statistics
  }
}

// Whether the device counts submissions and host waits (the simulator does, a GPU does not).
bool device_counts_work() {
  DeviceCounts probe;
  return gpu().device_counts(&probe);
}

}  // namespace

TEST_CASE("gpu: a captured graph runs nothing until replayed, then what was recorded", "[gpu][graphs]") {
  Backend& b = gpu();
  const Tensor ones = Tensor::full({4096}, 1.0, DType::Float32, Device::cuda(0));
  Tensor sum = Tensor::full({4096}, 0.0, DType::Float32, Device::cuda(0));
  Tensor filled = Tensor::full({4096}, 0.0, DType::Float32, Device::cuda(0));
  double value = 2.0;
  std::unique_ptr<StepGraph> graph = b.capture([&] {
    b.axpby(1.0, ones, 1.0, sum);  // sum += 1
    b.fill(filled, value);
  });
  CHECK(graph->nodes() >= 2);
  CHECK(first_value(sum) == 0.0f);  // recorded, not run
  CHECK(first_value(filled) == 0.0f);
  value = 5.0;  // a host value changed after the capture: the replay keeps the recorded 2
  for (int i = 0; i < 3; ++i) graph->replay();
  CHECK(first_value(sum) == 3.0f);
  CHECK(first_value(filled) == 2.0f);
}

TEST_CASE("gpu: a capture refuses a synchronisation, a read-back and an upload, and the device goes on",
          "[gpu][graphs]") {
  Backend& b = gpu();
  Tensor t = Tensor::full({256}, 0.0, DType::Float32, Device::cuda(0));
  REQUIRE_THROWS_WITH(b.capture([&] {
    b.fill(t, 1.0);
    b.synchronize();
  }),
                      Catch::Contains("capturing"));
  REQUIRE_THROWS_WITH(b.capture([&] { (void)t.to(Device::cpu()); }), Catch::Contains("read-back"));
  const Tensor host = Tensor::full({256}, 3.0);
  REQUIRE_THROWS_WITH(b.capture([&] { (void)host.to(Device::cuda(0)); }), Catch::Contains("host data"));
  // The refused captures ran nothing, and the stream works as before.
  CHECK(first_value(t) == 0.0f);
  b.fill(t, 4.0);
  CHECK(first_value(t) == 4.0f);
}

TEST_CASE("gpu: memory a graph uses is not handed to anyone else while the graph lives", "[gpu][graphs]") {
  Backend& b = gpu();
  Tensor sum = Tensor::full({1 << 16}, 0.0, DType::Float32, Device::cuda(0));
  const void* scratch_block = nullptr;
  std::unique_ptr<StepGraph> graph = b.capture([&] {
    Tensor scratch = Tensor::empty({1 << 16}, DType::Float32, Device::cuda(0));  // freed inside the step
    scratch_block = scratch.raw_data();
    b.fill(scratch, 7.0);
    b.axpby(1.0, scratch, 1.0, sum);
  });
  CHECK(graph->pool_bytes() >= (size_t(1) << 18));
  // A tensor of the same size made after the capture gets another block: a replay that wrote
  // into it would corrupt it.
  Tensor later = Tensor::full({1 << 16}, 0.0, DType::Float32, Device::cuda(0));
  CHECK(later.raw_data() != scratch_block);
  graph->replay();
  CHECK(first_value(later) == 0.0f);
  CHECK(first_value(sum) == 7.0f);
  graph.reset();  // the graph is gone: its blocks serve others again
  Tensor again = Tensor::empty({1 << 16}, DType::Float32, Device::cuda(0));
  CHECK(again.defined());
}

TEST_CASE("gpu: train with --cuda-graphs on gives eager mode's losses step for step", "[gpu][graphs][cli]") {
  // mlp: SGD with momentum; cnn: Adam, convolutions through cuDNN, max pools. 6 steps: cuDNN
  // chose its algorithms in the warm-up, so the first is captured and replayed, then replays
  // (without a warm-up the first runs eagerly: the test of the warm-up below).
  // Three ways: eager with host batches; graphs with host batches; graphs with the data set
  // on the device (batches gathered there).
  for (const std::string model : {"mlp", "cnn"})
    require_losses_equal_across_modes("--model " + model, {"--cuda-graphs off --data-on-device off",
                                                            "--cuda-graphs on --data-on-device off",
                                                            "--cuda-graphs on --data-on-device on"});
}

// The optimizer's update inside the graph reads its numbers from the device, written before
// each replay: under a one-cycle schedule the learning rate and the momentum (SGD) or β1
// (AdamW) change at every step, and Adam's bias corrections always do. Numbers frozen at the
// capture would part the losses from step 3.
TEST_CASE("gpu: a graph holding the update follows the schedule step by step", "[gpu][graphs][cli]") {
  require_losses_equal_across_modes("--model mlp --optimizer sgd --momentum 0.9 --nesterov --schedule onecycle",
                                    {"--cuda-graphs off", "--cuda-graphs on"});
  require_losses_equal_across_modes("--model mlp --optimizer adamw --schedule onecycle",
                                    {"--cuda-graphs off", "--cuda-graphs on"});
}

// A fault inside a replayed step is named as eager mode names it: the check in the graph reads
// the step's number from the device. SGD at lr 1000 diverges within a few steps; the flag is
// read at the log interval (step 8).
TEST_CASE("gpu: a non-finite loss inside a graph names eager mode's step", "[gpu][graphs][cli]") {
  std::string messages[2];
  const char* modes[2] = {"--cuda-graphs off", "--cuda-graphs on"};
  for (int m = 0; m < 2; ++m) {
    const nnlab_test::CliResult r =
        nnlab_test::run_cli(std::string("train --device cuda --model mlp --batch 32 --optimizer sgd --lr 1e3 "
                                        "--max-steps 16 --log-interval 8 --epochs 1 ") + modes[m]);
    INFO(modes[m] << ": " << r.output);
    CHECK(r.exit_code == 1);
    if (m == 1) CHECK_THAT(r.output, Catch::Contains("CUDA graphs: on"));
    const size_t at = r.output.find("nnlab: error: the loss became NaN or infinite at step ");
    REQUIRE(at != std::string::npos);
    messages[m] = r.output.substr(at, r.output.find('\n', at) - at);
  }
  CHECK(messages[1] == messages[0]);
}

// Crops, flips and the normalisation on the device (gather_images from Fashion-MNIST's bytes,
// the draws made on the host once per epoch) give the batches the host makes: the same
// losses, eager and with graphs.
TEST_CASE("gpu: crops and flips gathered on the device give the host's batches", "[gpu][graphs][cli]") {
  require_losses_equal_across_modes("--model mlp --crop-padding 3 --hflip --normalize dataset",
                                    {"--cuda-graphs off --data-on-device off", "--cuda-graphs off --data-on-device on",
                                     "--cuda-graphs on --data-on-device on"});
}

// Issue 35's count, in the steady state (the difference between a run of 12 steps and one of
// 6, so the first eager step, the capture and the epoch's end cancel out): a graph step hands
// the device a few items, an eager one several times more, and the graph step never makes the
// host wait for the device.
TEST_CASE("gpu: a graph step submits a few items and the host never waits for it", "[gpu][graphs][cli]") {
  if (!device_counts_work()) {
    WARN("skipped: the CUDA simulator counts submissions and host waits; a GPU's driver keeps no such count "
         "(this case runs in CI on the simulator)");
    return;
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnlab_graph_counts_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto totals = [&](int steps, bool graphs) {
    const std::string metrics = (dir / "counts.jsonl").string();
    const nnlab_test::CliResult r = nnlab_test::run_cli(
        "train --device cuda --model cnn --batch 8 --epochs 1 --test-images 64 --log-interval 1000 --max-steps " +
        std::to_string(steps) + " --metrics " + metrics +
        (graphs ? " --cuda-graphs on --data-on-device on" : " --cuda-graphs off --data-on-device off"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] != "epoch") continue;
      CHECK((j["cuda_graph_nodes"].get<int64_t>() > 0) == graphs);  // the record says what the step was
      CHECK(j["data_on_device"].get<bool>() == graphs);
      return std::pair<double, double>{j["submissions_per_step"].get<double>() * steps,
                                         j["host_waits_per_step"].get<double>() * steps};
    }
    FAIL("no epoch record in " << metrics);
    return std::pair<double, double>{0, 0};
  };
  const auto [graph_s6, graph_w6] = totals(6, true);
  const auto [graph_s12, graph_w12] = totals(12, true);
  const auto [eager_s6, eager_w6] = totals(6, false);
  const auto [eager_s12, eager_w12] = totals(12, false);
  const double graph_per_step = (graph_s12 - graph_s6) / 6, eager_per_step = (eager_s12 - eager_s6) / 6;
  INFO("per step: graph " << graph_per_step << " submissions, " << (graph_w12 - graph_w6) / 6 << " host waits; eager "
                          << eager_per_step << ", " << (eager_w12 - eager_w6) / 6);
  CHECK(graph_per_step > 0);
  // The replay (holding the batch's gather, the step, the check, the optimizer's numbers of
  // the step and its update, and the loss sum) and the phase mark after it; the numbers come
  // as a table once every 256 steps (both runs' only upload is at their first graphed step).
  CHECK(graph_per_step <= 2.01);
  CHECK(graph_per_step * 3 < eager_per_step);
  CHECK(graph_w12 == graph_w6);
  fs::remove_all(dir);
}

TEST_CASE("gpu: --cuda-graphs on refuses a model a graph would get wrong, in one message", "[gpu][graphs][cli]") {
  const nnlab_test::CliResult r =
      nnlab_test::run_cli("train --device cuda --model mlp --max-steps 1 --cuda-graphs on --check-numerics");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("--cuda-graphs on") && Catch::Contains("--check-numerics"));
  const nnlab_test::CliResult bad = nnlab_test::run_cli("train --device cuda --model mlp --cuda-graphs maybe");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Catch::Contains("--cuda-graphs must be auto, on or off"));
  const nnlab_test::CliResult cpu = nnlab_test::run_cli("train --device cpu --model mlp --max-steps 1 --data-on-device on");
  CHECK(cpu.exit_code != 0);
  CHECK_THAT(cpu.output, Catch::Contains("--data-on-device on: the run is on cpu"));
}

// Issue 40: compare trains each variant as train does, so its CUDA side makes the host wait
// as often as train's but for one read-back per epoch (the epoch's step losses), and hands the
// device one item more per step (the loss copied into compare's device buffer), not a
// read-back per step. The printed per-step figures times the steps are the totals.
TEST_CASE("gpu: compare's CUDA step waits for the device as often as train's", "[gpu][graphs][cli]") {
  if (!device_counts_work()) {
    WARN("skipped: the CUDA simulator counts submissions and host waits; a GPU's driver keeps no such count "
         "(this case runs in CI on the simulator)");
    return;
  }
  const int steps = 12;
  const std::string common = " --model cnn --batch 8 --max-steps " + std::to_string(steps) +
                             " --epochs 1 --test-images 64 --log-interval 1000";
  const auto per_step = [](const std::string& output) {
    const size_t at = output.find("per step: ");
    REQUIRE(at != std::string::npos);
    double submissions = 0, waits = 0;
    REQUIRE(std::sscanf(output.c_str() + at, "per step: %lf submissions to the device, %lf host waits", &submissions,
                        &waits) == 2);
    return std::pair<double, double>{submissions, waits};
  };
  const nnlab_test::CliResult train = nnlab_test::run_cli("train --device cuda" + common);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const nnlab_test::CliResult compare = nnlab_test::run_cli("compare --devices cpu,cuda" + common);
  INFO(compare.output);
  REQUIRE(compare.exit_code == 0);
  const auto [train_submissions, train_waits] = per_step(train.output);
  const auto [compare_submissions, compare_waits] = per_step(compare.output);
  CHECK(std::lround(compare_waits * steps) == std::lround(train_waits * steps) + 1);
  CHECK(std::fabs(compare_submissions - train_submissions - 1.0) < 0.15);
}

// Trainer::warm_up: forward and backward on zeros before the clock, BatchNorm's running
// statistics and Dropout's step counts put back, the gradients dropped. A run's losses and its
// test accuracy (which reads the running statistics) are those of a run without it.
//
// The model has BatchNorm and two Dropout layers, so this is also Dropout inside the graph:
// each layer's step count is on the device, read by the mask kernel and advanced by a kernel,
// so every replay draws a new mask, eager mode's mask of that step. A count passed as a host
// argument instead would be frozen at the capture: the replays would reuse one mask and the
// losses part from the second replayed step.
TEST_CASE("gpu: the warm-up before the first epoch changes no loss and no running statistic", "[gpu][graphs][cli]") {
  require_losses_equal_across_modes("--conv-impl reference --model-file " + std::string(NNLAB_TEST_DIR) +
                                        "/../docs/examples/conv-bn-dropout.json",
                                    {"--no-warm-up --cuda-graphs off", "--cuda-graphs off", "--no-warm-up --cuda-graphs on",
                                     "--cuda-graphs on"});
}

// bf16 activations (--precision bf16) add casts and bf16 copies of the weights to the step;
// captured, the step still gives eager mode's losses bit for bit.
TEST_CASE("gpu: --precision bf16 trains in a graph as eagerly", "[gpu][graphs][cli][precision]") {
  require_losses_equal_across_modes("--model cnn --precision bf16",
                                    {"--cuda-graphs off --data-on-device off", "--cuda-graphs on --data-on-device on"});
}
