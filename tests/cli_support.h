// Shared by the end-to-end tests of the `nnlab` program: run it, read back what it wrote (the
// scratch folder, TempDir, is in test_support.h).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/serialization.h"
#include "test_support.h"

namespace nnlab_test {

// Debian's dataset-fashion-mnist: the end-to-end tests that train on real data need it.
inline const char* const kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

struct CliResult {
  int exit_code;       // -1 when killed by a signal
  std::string output;  // what the command printed on stdout (and stderr, unless split)
};

// Runs `command` through /bin/sh as given; returns its exit code and its stdout.
inline CliResult run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A shell command line (environment assignments allowed), stdout and stderr together.
inline CliResult run_shell(const std::string& command) { return run_command(command + " 2>&1"); }

// Runs the built program with `args`; returns its exit code and everything it printed.
inline CliResult run_cli(const std::string& args) { return run_shell(std::string(NNLAB_CLI_PATH) + " " + args); }

// The whole file as bytes ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct SplitResult {
  int exit_code;
  std::string out, err;
};

// Runs the built program with stdout and stderr kept apart (stderr goes through a scratch file
// in a folder of its own, so it never shows up among the files a test lists).
inline SplitResult run_cli_split(const std::string& args) {
  const TempDir scratch("nnlab_stderr");
  const std::string err_file = scratch / "stderr.txt";
  const CliResult r = run_command(std::string(NNLAB_CLI_PATH) + " " + args + " 2>" + err_file);
  return {r.exit_code, r.output, read_text(err_file)};
}

// The losses of a --metrics file's {"type": "step"} records, in order. A non-finite loss is
// written as null and read back as NaN.
inline std::vector<double> step_losses(const std::string& metrics) {
  std::ifstream in(metrics);
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "step") continue;
    losses.push_back(j["loss"].is_null() ? std::nan("") : j["loss"].get<double>());
  }
  return losses;
}

// Every tensor of checkpoint b equals checkpoint a's bit for bit (inf and NaN included).
inline void expect_same_tensors(const std::string& a_path, const std::string& b_path) {
  const nnlab::SafetensorsFile a = nnlab::load_safetensors(a_path), b = nnlab::load_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    INFO(name);
    const nnlab::Tensor& u = b.at(name);
    REQUIRE(u.nbytes() == t.nbytes());
    CHECK(std::memcmp(u.raw_data(), t.raw_data(), t.nbytes()) == 0);
  }
}

}  // namespace nnlab_test
