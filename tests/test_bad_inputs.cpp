// The bad-input catalogue of docs/reliability.md, end to end through `nnlab train`: each case
// must end in one clear message, a non-zero exit code, and no output file changed. The
// readers' own refusals are tested case by case in test_idx, test_cifar, test_image_folder,
// test_serialization and test_checkpoint; here the same faults (and those only the program
// can see: a model that does not fit the images, a loss or gradient that turns NaN) go through
// the CLI.
#include <cmath>
#include <cstring>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli_support.h"
#include "core/serialization.h"

namespace fs = std::filesystem;
using nnlab_test::CliResult;
using nnlab_test::read_text;
using nnlab_test::run_cli;
using nnlab_test::step_losses;
using nnlab_test::TempDir;
using nnlab_test::write_bytes;

namespace {

// An IDX file of unsigned bytes: magic 0 0 8 d, big-endian extents, data.
std::vector<uint8_t> idx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// An MNIST-format folder: n training and n test images of side × side pixels, labels i % 10
// except that label_at[i] overrides image i's label in the training set.
void write_mnist(const TempDir& dir, uint32_t n, uint32_t side, const std::map<uint32_t, uint8_t>& label_at = {}) {
  std::vector<uint8_t> pixels(n * side * side), labels(n);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 7 + i / 784 * 13) % 256);
  for (uint32_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>(i % 10);
  std::vector<uint8_t> test_labels = labels;
  for (const auto& [i, label] : label_at) labels[i] = label;
  write_bytes(dir / "train-images-idx3-ubyte", idx({n, side, side}, pixels));
  write_bytes(dir / "train-labels-idx1-ubyte", idx({n}, labels));
  write_bytes(dir / "t10k-images-idx3-ubyte", idx({n, side, side}, pixels));
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx({n}, test_labels));
}

// A CIFAR-10 folder of one-record batches; `skip` names a batch left out.
void write_cifar(const TempDir& dir, const std::string& skip = "", uint8_t first_label = 3) {
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"}) {
    if (name == skip) continue;
    std::vector<uint8_t> record(3073, 100);
    record[0] = first_label;
    write_bytes(dir / name, record);
  }
}

// Runs `args` with --metrics pointing at a file that already holds an earlier run's record,
// and checks the refusal: non-zero exit, the message, and the output folder untouched.
void expect_refusal(const std::string& args, const std::string& message) {
  TempDir out;
  const std::string metrics = out / "metrics.jsonl";
  const std::string earlier = "{\"type\":\"epoch\",\"note\":\"an earlier run\"}\n";
  std::ofstream(metrics) << earlier;
  const CliResult r = run_cli("train " + args + " --metrics " + metrics);
  INFO("nnlab train " << args << "\n" << r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find(message) != std::string::npos);
  CHECK(r.output.find("nnlab: error: ") != std::string::npos);  // one message, not a crash report
  CHECK(read_text(metrics) == earlier);
  CHECK(std::distance(fs::directory_iterator(out.path), fs::directory_iterator()) == 1);
}

}  // namespace

TEST_CASE("bad inputs: a model that does not fit the data set's images is refused", "[bad_inputs]") {
  TempDir data;
  write_mnist(data, 8, 2);  // 2×2 images: too small for two 2×2 poolings
  expect_refusal("--model cnn --data mnist --data-dir " + data.path.string(),
                 "zoo model cnn: layer 'pool2' (maxpool2d): its 64×1×1 input is too small for its 2-wide window "
                 "(padding 0); use a smaller kernel, more padding, or less pooling before it");
  expect_refusal("--model cifar-cnn --data mnist --data-dir " + data.path.string(),
                 "zoo model cifar-cnn: layer 'pool2' (maxpool2d): its 64×1×1 input is too small");
  expect_refusal("--model lenet5 --data mnist --data-dir " + data.path.string(),
                 "zoo model lenet5: layer 'c2' (conv2d): its 6×1×1 input is too small for its 5-wide window");
}

TEST_CASE("bad inputs: labels out of range for the model's 10 classes", "[bad_inputs]") {
  TempDir data;
  write_mnist(data, 8, 28, {{3, 12}});
  expect_refusal("--data mnist --data-dir " + data.path.string(),
                 "train-labels-idx1-ubyte has label 12 at index 3; labels are 0..9, so the file is corrupt or "
                 "belongs to another data set");
  TempDir cifar;
  write_cifar(cifar, "", 10);
  expect_refusal("--data cifar10 --data-dir " + cifar.path.string(), "data_batch_1.bin record 0 has label 10");
}

TEST_CASE("bad inputs: CIFAR-10 folders with missing or cut batches", "[bad_inputs]") {
  TempDir cifar;
  write_cifar(cifar, "data_batch_5.bin");
  expect_refusal("--data cifar10 --data-dir " + cifar.path.string(),
                 "CIFAR-10 train files missing in " + cifar.path.string() +
                     ": data_batch_5.bin; fetch the data set with nnlab data fetch cifar10");
  write_cifar(cifar);
  fs::resize_file(cifar / "data_batch_2.bin", 3000);
  expect_refusal("--data cifar10 --data-dir " + cifar.path.string(), "not a whole number of 3073-byte records");
}

TEST_CASE("bad inputs: numbers and paths on the command line", "[bad_inputs]") {
  TempDir data;
  write_mnist(data, 8, 28);
  const std::string d = " --data mnist --data-dir " + data.path.string();
  expect_refusal("--lr nan" + d, "--lr must be a finite number >= 0, got nan");
  expect_refusal("--lr inf" + d, "--lr must be a finite number >= 0, got inf");
  expect_refusal("--lr -1" + d, "--lr must be a finite number >= 0, got -1");
  expect_refusal("--batch 0" + d, "--batch must be at least 1");
  expect_refusal("--epochs -2" + d, "--epochs must be at least 1");
  expect_refusal("--denormals sometimes" + d, "--denormals 'sometimes' is not known; choose flush or keep");
  expect_refusal("--math fp16" + d, "--math 'fp16' is not known; choose fp32, tf32 or bf16");
  expect_refusal("--device cpu --math tf32" + d, "--math tf32 is a format of NVIDIA's tensor cores; on the CPU use "
                                                 "fp32 (the default) or bf16");
  expect_refusal("--data mnist --data-dir " + data.path.string() + "/absent",
                 "data directory " + data.path.string() + "/absent for mnist does not exist");
  expect_refusal("--checkpoint-dir /proc/nnlab-no-such-place" + d, "--checkpoint-dir /proc/nnlab-no-such-place cannot be created");

  // Option-parser refusals (CLI11) exit with its own codes; the message still names the option.
  for (const std::string& args : {std::string("--batch 1e3"), std::string("--lr abc"), std::string("--frobnicate")}) {
    const CliResult r = run_cli("train " + args + d);
    INFO(args << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(args.substr(0, args.find(' '))) != std::string::npos);
  }
}

TEST_CASE("train with pace-stdin: one line starts each epoch, and a closed standard input ends the run clearly", "[bad_inputs]") {
  TempDir data;
  write_mnist(data, 8, 28);
  const std::string train = std::string(NNLAB_CLI_PATH) + " train --epochs 2 --batch 4 --data mnist --data-dir " +
                            data.path.string() + " --pace-stdin";
  const CliResult paced = nnlab_test::run_shell("printf 'go\\ngo\\n' | " + train);
  INFO(paced.output);
  CHECK(paced.exit_code == 0);
  const size_t ready1 = paced.output.find("ready for epoch 1\n"), epoch1 = paced.output.find("epoch 1/2");
  const size_t ready2 = paced.output.find("ready for epoch 2\n"), epoch2 = paced.output.find("epoch 2/2");
  REQUIRE(ready1 != std::string::npos);
  REQUIRE(ready2 != std::string::npos);
  CHECK(ready1 < epoch1);
  CHECK(epoch1 < ready2);  // the first epoch's line is out before the run waits again
  CHECK(ready2 < epoch2);

  const CliResult cut = nnlab_test::run_shell("printf 'go\\n' | " + train);
  INFO(cut.output);
  CHECK(cut.exit_code == 1);
  CHECK(cut.output.find("epoch 1/2") != std::string::npos);
  CHECK(cut.output.find("nnlab: error: --pace-stdin: standard input closed before epoch 2") != std::string::npos);
}

TEST_CASE("bad inputs: an unwritable --metrics path fails before any training", "[bad_inputs]") {
  TempDir data, out;
  write_mnist(data, 8, 28);
  const std::string d = " --data mnist --data-dir " + data.path.string();
  for (const std::string& metrics : {out / "no-such-folder/m.jsonl", out.path.string()}) {
    const CliResult r = run_cli("train --max-steps 1" + d + " --metrics " + metrics);
    INFO(metrics << "\n" << r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("nnlab: error: cannot write the metrics file '" + metrics + "'") != std::string::npos);
    CHECK(r.output.find("choose a writable path with --metrics") != std::string::npos);
    CHECK(r.output.find("epoch 1/") == std::string::npos);
  }
  CHECK(fs::is_empty(out.path));
}

TEST_CASE("bad inputs: a loss that turns NaN stops the run and no update follows it", "[bad_inputs][numerics]") {
  TempDir data, one, stopped;
  write_mnist(data, 64, 28);
  // lr 1e30: step 1 is finite and throws the weights out of range, step 2's loss is not
  // finite. The run saves a checkpoint after every step, and a save first checks the
  // non-finite flag: it stops at step 2's save, keeping step 1's checkpoint, whose weights and
  // momentum must be those of the one-step run.
  const std::string common = "train --data mnist --data-dir " + data.path.string() + " --batch 4 --lr 1e30";
  REQUIRE(run_cli(common + " --max-steps 1 --checkpoint-dir " + one.path.string()).exit_code == 0);
  const CliResult r = run_cli(common + " --max-steps 10 --log-interval 5 --checkpoint-every 1 --checkpoint-dir " +
                              stopped.path.string());
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("nnlab: error: the loss became NaN or infinite at step 2 (epoch 1, step 2 of 16); nothing was "
                      "saved, so " + (stopped / "last.safetensors") + " still holds the last good state. Try a "
                      "smaller --lr; --check-numerics names the layer at fault.\n") != std::string::npos);
  CHECK(r.output.find("epoch 1/") == std::string::npos);  // no epoch line with a NaN loss
  nnlab_test::expect_same_tensors(one / "last.safetensors", stopped / "last.safetensors");
  // The one-step checkpoint's weights are finite but give infinite logits: eval and predict
  // refuse it rather than print an arbitrary accuracy or NaN probabilities.
  const std::string image = std::string(NNLAB_TEST_DIR) + "/fuzz/corpus/image/gray-5x4.png";
  for (const std::string& cmd : {"eval --checkpoint " + one / "last.safetensors",
                                 "predict --checkpoint " + one / "last.safetensors" + " " + image}) {
    const CliResult e = run_cli(cmd);
    INFO(cmd << "\n" << e.output);
    CHECK(e.exit_code == 1);
    CHECK(e.output.find("nnlab: error: the model's output is NaN or infinite: checkpoint " + one / "last.safetensors" +
                        " holds weights from a run that diverged") != std::string::npos);
    CHECK(e.output.find("nan") == std::string::npos);
  }
}

TEST_CASE("numerical faults: the step named is the first whose loss is not finite", "[bad_inputs][numerics]") {
  TempDir data, out;
  write_mnist(data, 64, 28);
  // SGD at lr 1000 diverges over a few steps; the flag is read only at step 8 (the log
  // interval), yet the message must name the first step whose loss the per-step records show
  // as non-finite (written as null), not step 8.
  const std::string metrics = out / "m.jsonl";
  const CliResult r = run_cli("train --data mnist --data-dir " + data.path.string() + " --batch 4 --threads 1 "
                              "--optimizer sgd --lr 1e3 --max-steps 16 --log-interval 8 --metrics-every 1 "
                              "--metrics " + metrics);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  const std::vector<double> losses = step_losses(metrics);
  REQUIRE(losses.size() == 8);  // it ran to the log interval, then stopped
  size_t first_bad = 0;
  while (first_bad < losses.size() && std::isfinite(losses[first_bad])) ++first_bad;
  REQUIRE(first_bad >= 1);  // step 1 is finite ...
  REQUIRE(first_bad < 7);   // ... and the fault came well before the log interval
  const std::string step = std::to_string(first_bad + 1);
  CHECK(r.output.find("nnlab: error: the loss became NaN or infinite at step " + step + " (epoch 1, step " + step +
                      " of 16); no update was applied from that step on. Try a smaller --lr; --check-numerics "
                      "names the layer at fault.\n") != std::string::npos);
  CHECK(r.output.find("epoch 1/") == std::string::npos);
}

TEST_CASE("numerical faults: a non-finite gradient under a finite loss stops the run at its step",
          "[bad_inputs][numerics]") {
  TempDir data, three, stopped;
  write_mnist(data, 64, 28);
  // cnn-bn under SGD at lr 1000: BatchNorm keeps the loss finite while the first
  // convolution's weight gradient overflows. The run saves after every step; the save after
  // the bad step finds the flag raised and stops, so the folder keeps the state of the step
  // before it, which must equal that of a run that stopped there by itself.
  const std::string common = "train --data mnist --data-dir " + data.path.string() + " --model cnn-bn --batch 4 "
                             "--threads 1 --optimizer sgd --lr 1e3 --log-interval 8";
  const std::string metrics = stopped / "m.jsonl";
  const CliResult r = run_cli(common + " --max-steps 16 --checkpoint-every 1 --checkpoint-dir " +
                              stopped.path.string() + " --metrics-every 1 --metrics " + metrics);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  const std::vector<double> losses = step_losses(metrics);
  REQUIRE(losses.size() >= 2);
  for (double loss : losses) CHECK(std::isfinite(loss));  // every loss up to the bad step was finite
  const std::string bad = std::to_string(losses.size()), good = std::to_string(losses.size() - 1);
  CHECK(r.output.find("nnlab: error: the gradient of c1.weight became NaN or infinite at step " + bad +
                      " (epoch 1, step " + bad + " of 16) although the loss was finite; nothing was saved, so " +
                      (stopped / "last.safetensors") + " still holds the last good state.") != std::string::npos);
  REQUIRE(run_cli(common + " --max-steps " + good + " --checkpoint-dir " + three.path.string()).exit_code == 0);
  nnlab_test::expect_same_tensors(three / "last.safetensors", stopped / "last.safetensors");
}

TEST_CASE("numerical faults: --check-numerics names the layer and the step, and keeps the checkpoint",
          "[bad_inputs][numerics]") {
  TempDir data, run;
  write_mnist(data, 64, 28);
  // One good step saved, then a resumed run at lr 1e30 whose step 2 overflows: fc1's output
  // is still finite, fc2's is not. The run stops in that step's forward pass, before any
  // update or save, and the checkpoint is the same file, byte for byte.
  const std::string common = "train --data mnist --data-dir " + data.path.string() + " --batch 4 --threads 1 "
                             "--lr 1e30 --checkpoint-dir " + run.path.string();
  REQUIRE(run_cli(common + " --max-steps 1").exit_code == 0);
  const std::string checkpoint = run / "last.safetensors", before = read_text(checkpoint);
  REQUIRE(!before.empty());
  const CliResult r = run_cli(common + " --check-numerics --max-steps 10 --checkpoint-every 1 --resume " + checkpoint);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("nnlab: error: --check-numerics, step 2 (epoch 1, step 2 of 16): the output of layer 'fc2' "
                      "(Linear(in_features=256, out_features=128, bias=true)) holds NaN or infinite values although "
                      "its input was finite; lower --lr, add --clip-grad-norm, or check the data\n") !=
        std::string::npos);
  CHECK(r.output.find("epoch 1/") == std::string::npos);
  CHECK(read_text(checkpoint) == before);
}

TEST_CASE("bad inputs: checkpoints with tensors missing or of the wrong shape for the model", "[bad_inputs]") {
  TempDir data, run;
  write_mnist(data, 8, 28);
  REQUIRE(run_cli("train --data mnist --data-dir " + data.path.string() + " --batch 4 --max-steps 1 --checkpoint-dir " +
                  run.path.string())
              .exit_code == 0);
  const nnlab::SafetensorsFile good = nnlab::load_safetensors(run / "last.safetensors");
  // The same file with one tensor left out, and with one tensor of another shape.
  std::vector<std::pair<std::string, nnlab::Tensor>> missing, reshaped;
  for (const auto& [name, t] : good.tensors) {
    if (name != "fc2.weight") missing.emplace_back(name, t);
    reshaped.emplace_back(name, name == "fc1.bias" ? nnlab::Tensor::zeros({t.numel() / 2, 2}) : t);
  }
  nnlab::save_safetensors(run / "missing.safetensors", missing, good.metadata);
  nnlab::save_safetensors(run / "reshaped.safetensors", reshaped, good.metadata);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"missing", "was saved from model mlp; it has no tensor fc2.weight, which model mlp needs"},
      {"reshaped", "was saved from model mlp; tensor fc1.bias has shape [128, 2] but model mlp expects [256]"},
  };
  for (const auto& [file, message] : cases) {
    const std::string path = run / (file + ".safetensors"), before = read_text(path);
    for (const std::string& cmd : {"eval --checkpoint " + path, "train --data mnist --data-dir " + data.path.string() +
                                                                    " --batch 4 --max-steps 2 --resume " + path}) {
      const CliResult r = run_cli(cmd);
      INFO(cmd << "\n" << r.output);
      CHECK(r.exit_code == 1);
      CHECK(r.output.find("nnlab: error: checkpoint " + path + " " + message) != std::string::npos);
      CHECK(read_text(path) == before);
    }
  }
}
