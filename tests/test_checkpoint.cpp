// Checkpoints end to end through the `nnlab` program on real Fashion-MNIST: bit-identical
// resume (after a clean stop, and after a crash right after a mid-epoch save), the best
// checkpoint of a validation split, SIGINT/SIGTERM, the numpy-only reader, and bad input.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"
#include "core/serialization.h"

namespace fs = std::filesystem;
using nnlab_test::CliResult;
using nnlab_test::kFashion;
using nnlab_test::read_text;
using nnlab_test::run_cli;
using nnlab_test::run_shell;
using nnlab_test::step_losses;
using nnlab_test::TempDir;

namespace {

// Bytes and modification time: what "the file did not change" means.
std::string fingerprint(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "(absent)";
  return read_text(path) + "@" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

nlohmann::json training_meta(const std::string& checkpoint) {
  return nlohmann::json::parse(nnlab::load_safetensors(checkpoint).metadata.at("training"));
}

const std::string kCommon = "train --model mlp --epochs 1 --seed 5 --threads 2 --metrics-every 1";

}  // namespace

TEST_CASE("resume continues bit for bit, after a stop and after a crash at a mid-epoch save", "[checkpoint]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const TempDir tmp("nnlab_ckpt");
  const std::string d = tmp / "resume";
  const CliResult full = run_cli(kCommon + " --max-steps 20 --metrics " + d + "_full.jsonl");
  REQUIRE(full.exit_code == 0);
  const std::vector<double> expected = step_losses(d + "_full.jsonl");
  REQUIRE(expected.size() == 20);

  // A clean stop after 10 steps (the epoch-end save), then --resume to 20.
  const CliResult a = run_cli(kCommon + " --max-steps 10 --checkpoint-dir " + d + " --metrics " + d + "_a.jsonl");
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  const std::string last = d + "/last.safetensors";
  REQUIRE(fs::exists(last));
  CHECK(training_meta(last)["global_step"] == 10);
  const CliResult b = run_cli(kCommon + " --max-steps 20 --resume " + last + " --metrics " + d + "_b.jsonl");
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK(b.output.find("resuming from") != std::string::npos);
  std::vector<double> resumed = step_losses(d + "_a.jsonl");
  for (double l : step_losses(d + "_b.jsonl")) resumed.push_back(l);
  CHECK(resumed == expected);  // bit-identical, not merely close

  // --checkpoint-every 4 with a SIGKILL right after the first save's rename: the crashed run
  // leaves a complete checkpoint of step 4, and resuming from it repeats steps 5..12 exactly.
  const std::string d2 = d + "_every";
  const CliResult crashed = run_shell("NNLAB_FAULT_INJECT=after-rename " + std::string(NNLAB_CLI_PATH) + " " + kCommon +
                                      " --max-steps 20 --checkpoint-every 4 --checkpoint-dir " + d2 + " --metrics " +
                                      d + "_c.jsonl");
  CHECK(crashed.exit_code != 0);
  REQUIRE(fs::exists(d2 + "/last.safetensors"));
  CHECK(training_meta(d2 + "/last.safetensors")["global_step"] == 4);
  CHECK(training_meta(d2 + "/last.safetensors")["step_in_epoch"] == 4);
  const CliResult c = run_cli(kCommon + " --max-steps 12 --resume " + d2 + "/last.safetensors --metrics " + d +
                              "_d.jsonl");
  REQUIRE(c.exit_code == 0);
  const std::vector<double> tail = step_losses(d + "_d.jsonl");
  CHECK(tail == std::vector<double>(expected.begin() + 4, expected.begin() + 12));
}

TEST_CASE("val-split keeps the best checkpoint, and checkpoints name PyTorch tensors", "[checkpoint]") {
  if (!fs::exists(kFashion)) return;
  const TempDir tmp("nnlab_ckpt");
  const std::string d = tmp / "best";
  const CliResult r = run_cli("train --model mlp --epochs 2 --max-steps 8 --val-split 0.1 --seed 1 --threads 2 "
                              "--checkpoint-dir " + d);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("validation accuracy") != std::string::npos);
  REQUIRE(fs::exists(d + "/best.safetensors"));
  REQUIRE(fs::exists(d + "/last.safetensors"));
  const nnlab::SafetensorsFile f = nnlab::load_safetensors(d + "/best.safetensors");
  CHECK(f.at("fc1.weight").shape() == nnlab::Shape{256, 784});
  CHECK(f.at("fc3.bias").shape() == nnlab::Shape{10});
  CHECK(f.at("optimizer.0.momentum_buffer").shape() == nnlab::Shape{256, 784});
  CHECK(f.metadata.at("model") == "mlp");
  const double best = training_meta(d + "/best.safetensors")["best_val_accuracy"].get<double>();
  CHECK(best > 0.1);
  CHECK(best <= 1.0);

  // The numpy-only reader (no torch) agrees on names, shapes and values.
  std::string python;
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (python.empty() && std::system((std::string(py) + " -c 'import numpy' 2>/dev/null").c_str()) == 0) python = py;
  if (python.empty()) {
    WARN("numpy is not installed (python3-numpy); skipping the independent reader check");
  } else {
    const CliResult py = run_shell(python + " " + NNLAB_TEST_DIR + "/read_safetensors.py " + d + "/best.safetensors");
    INFO(py.output);
    REQUIRE(py.exit_code == 0);
    CHECK(py.output.find("fc1.weight F32 [256, 784]") != std::string::npos);
    CHECK(py.output.find("optimizer.5.momentum_buffer F32 [10]") != std::string::npos);
    CHECK(py.output.find("meta config") != std::string::npos);
    char expect[128];
    const std::vector<float> w = f.at("fc2.weight").to_vector<float>();
    std::snprintf(expect, sizeof expect, "fc2.weight F32 [128, 256] %.9g %.9g %.9g", w[0], w[1], w[2]);
    CHECK(py.output.find(expect) != std::string::npos);
  }
}

TEST_CASE("SIGINT and SIGTERM finish the step, save and exit 130 / 143", "[checkpoint]") {
  if (!fs::exists(kFashion)) return;
  for (const int sig : {SIGINT, SIGTERM}) {
    const TempDir tmp("nnlab_ckpt");
    const std::string d = tmp / "signal", metrics = d + ".jsonl", log = d + ".log";
    const std::string cmd = std::string(NNLAB_CLI_PATH) + " " + kCommon + " --max-steps 100000 --checkpoint-dir " + d +
                            " --metrics " + metrics;
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      freopen(log.c_str(), "w", stdout);
      dup2(fileno(stdout), 2);
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait until the run has taken a few steps (at most 60 s), then signal it.
    for (int i = 0; i < 600 && step_losses(metrics).size() < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(step_losses(metrics).size() >= 3);
    kill(pid, sig);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    const std::string output = read_text(log);
    INFO(output);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK(output.find(sig == SIGINT ? "SIGINT: stopped after step" : "SIGTERM: stopped after step") !=
          std::string::npos);
    REQUIRE(fs::exists(d + "/last.safetensors"));
    // The saved step is one the run finished: the metrics file recorded it.
    const auto steps = training_meta(d + "/last.safetensors")["global_step"].get<size_t>();
    CHECK(steps >= 3);
    CHECK(steps == step_losses(metrics).size());
  }
}

TEST_CASE("bad checkpoints and checkpoint folders fail clearly and change no file", "[checkpoint]") {
  if (!fs::exists(kFashion)) return;
  const TempDir tmp("nnlab_ckpt");
  const std::string d = tmp / "bad", metrics = d + ".jsonl";
  REQUIRE(run_cli("train --model mlp --epochs 1 --max-steps 2 --threads 2 --checkpoint-dir " + d).exit_code == 0);
  const std::string good = d + "/last.safetensors";
  const std::string truncated = d + "/truncated.safetensors", corrupt = d + "/corrupt.safetensors";
  {
    std::string bytes = read_text(good);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    bytes[8] = '#';  // the JSON header's opening brace
    std::ofstream(corrupt, std::ios::binary) << bytes;
  }
  const std::string blocker = d + "/a_file";
  std::ofstream(blocker) << "x";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model mlp --resume " + d + "/missing.safetensors", "does not exist"},
      {"--model mlp --resume " + truncated, "out of range: the data section holds"},
      {"--model mlp --resume " + corrupt, "corrupt JSON header"},
      {"--model cnn --resume " + good, "was saved from model mlp, not --model cnn"},
      {"--model mlp --batch 32 --resume " + good, "--batch 64, not 32"},
      {"--model mlp --checkpoint-dir " + blocker + "/sub", "--checkpoint-dir " + blocker + "/sub cannot be created"},
      {"--model mlp --checkpoint-every 5", "--checkpoint-every needs --checkpoint-dir"},
      {"--model mlp --val-split 1.5", "--val-split must be a fraction"},
  };
  const std::vector<std::string> files = {good, truncated, corrupt, blocker};
  for (const auto& [args, message] : cases) {
    std::vector<std::string> before;
    for (const auto& f : files) before.push_back(fingerprint(f));
    const CliResult r = run_cli("train --epochs 1 --max-steps 2 --threads 2 --metrics " + metrics + " " + args);
    INFO(args << "\n" << r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find(message) != std::string::npos);
    CHECK(r.output.find("epoch 1/1") == std::string::npos);  // refused before any training
    CHECK_FALSE(fs::exists(metrics));
    for (size_t i = 0; i < files.size(); ++i) CHECK(fingerprint(files[i]) == before[i]);
  }
}
