// The `nnlab` program end to end: a short real training run, reproducibility, and bad
// options that must fail with one clear message, a non-zero exit and no output file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_support.h"

using nnlab_test::CliResult;
using nnlab_test::kFashion;
using nnlab_test::run_cli;
using nnlab_test::step_losses;
using nnlab_test::TempDir;
using nnlab_test::ScopedEnv;
namespace fs = std::filesystem;

namespace {

double mean_of(const std::vector<double>& v, size_t begin, size_t end) {
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += v[i];
  return s / static_cast<double>(end - begin);
}


}  // namespace

TEST_CASE("train mlp: the loss falls and a seed repeats exactly", "[cli]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const TempDir dir("nnlab_cli");
  const std::string m1 = dir / "m1.jsonl", m2 = dir / "m2.jsonl";
  const std::string common = "train --model mlp --epochs 1 --max-steps 200 --seed 3 --threads 2 --metrics-every 1";
  const CliResult r1 = run_cli(common + " --metrics " + m1);
  INFO(r1.output);
  REQUIRE(r1.exit_code == 0);
  CHECK(r1.output.find("final test accuracy") != std::string::npos);
  const auto losses = step_losses(m1);
  REQUIRE(losses.size() == 200);
  // Mean loss over steps 151–200 is below 0.6× the mean over steps 1–50.
  CHECK(mean_of(losses, 150, 200) < 0.6 * mean_of(losses, 0, 50));

  const CliResult r2 = run_cli(common + " --metrics " + m2);
  REQUIRE(r2.exit_code == 0);
  CHECK(step_losses(m2) == losses);  // bit-identical with the same seed, binary and threads
}

TEST_CASE("bad options fail with one clear message and write nothing", "[cli]") {
  const TempDir dir("nnlab_cli");
  const std::string metrics = dir / "bad.jsonl";
  // An empty data folder: `--data mnist` must not find a copy `nnlab data fetch` installed.
  const ScopedEnv no_store("NNLAB_DATA_DIR", dir / "no-store");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --batch 0", "--batch must be at least 1"},
      {"train --batch -5", "--batch must be at least 1"},
      {"train --lr nan", "--lr must be a finite number"},
      {"train --lr abc", "--lr"},
      {"train --epochs 0", "--epochs must be at least 1"},
      {"train --model resnet999", "unknown model 'resnet999'"},
      {"train --data imagenet", "not a known data set"},
      {"train --optimizer rmsprop", "'rmsprop' is not known"},
      {"train --data mnist", "--data-dir is required"},
      {"train --data-dir /nonexistent/nnlab", "/nonexistent/nnlab"},
      {"train --betas 0.9", "--betas must be two numbers"},
      {"train --nesterov --optimizer adam", "--nesterov applies to --optimizer sgd only"},
      {"train --device tpu", "unknown device 'tpu'"},
      {"train --precision fp16", "'fp16' is not a precision (fp32, tf32 or bf16)"},
      {"train --precision tf32 --math bf16", "--precision tf32 is --math tf32"},
      {"train --no-such-option", "--no-such-option"},
      {"frobnicate", "frobnicate"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli(args + " --metrics " + metrics);
    INFO(args << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(message) != std::string::npos);
    CHECK_FALSE(fs::exists(metrics));
  }
}

TEST_CASE("an unusable --device cuda is an error, never a silent CPU run", "[cli]") {
  const CliResult devices = run_cli("devices");
  REQUIRE(devices.exit_code == 0);
  CHECK(devices.output.find("cpu:") != std::string::npos);
  if (devices.output.find("not usable") == std::string::npos) return;  // a GPU machine
  const CliResult r = run_cli("train --device cuda --max-steps 1");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("--device cuda cannot be used") != std::string::npos);
}

TEST_CASE("help lists every subcommand and option", "[cli]") {
  const CliResult top = run_cli("--help");
  CHECK(top.exit_code == 0);
  for (const char* sub : {"train", "devices", "models"}) CHECK(top.output.find(sub) != std::string::npos);
  const CliResult train = run_cli("train --help");
  for (const char* opt : {"--data", "--data-dir", "--model", "--epochs", "--batch", "--optimizer", "--lr",
                          "--momentum", "--nesterov", "--weight-decay", "--betas", "--seed", "--threads", "--device",
                          "--check-numerics", "--precision"})
    CHECK(train.output.find(opt) != std::string::npos);
}
