// `nnlab sweep` end to end on the CPU (two thread counts as the two "devices"): the table
// over batch sizes and widths, the crossover line, the JSON records, the self-contained
// report, and its refusals.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "devices/registry.h"

namespace fs = std::filesystem;

namespace {

struct CliResult {
  int exit_code;
  std::string output;
};

CliResult run_cli(const std::string& args) {
  FILE* pipe = popen((std::string(NNLAB_CLI_PATH) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("nnlab_sweep_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("sweep measures images/s over batches and widths with a crossover verdict", "[sweep]") {
  TempDir dir;
  const CliResult r = run_cli("sweep --model mlp --devices cpu:threads=1,cpu:threads=2 --batches 2,16 --widths 0.5,2 "
                              "--steps 1 --warmup 1 --report " + (dir / "s.html") + " --metrics " + (dir / "s.jsonl"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("crossover (mlp width 0.5 fp32)") != std::string::npos);
  CHECK(r.output.find("crossover (mlp width 2 fp32)") != std::string::npos);
  std::ifstream in(dir / "s.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const auto j = nlohmann::json::parse(line);
    CHECK(j["cpu:threads=1"].get<double>() > 0);
    CHECK(j["cpu:threads=2"].get<double>() > 0);
  }
  CHECK(lines == 4);  // 2 widths × 2 batches
  const std::string html = read_text(dir / "s.html");
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
}

TEST_CASE("sweep refuses what it cannot measure", "[sweep]") {
  TempDir dir;
  const std::string report = dir / "s.html";
  const CliResult width = run_cli("sweep --model lenet5 --widths 2 --devices cpu:threads=1,cpu --report " + report);
  CHECK(width.exit_code != 0);
  CHECK(width.output.find("width multipliers are built for mlp and cnn") != std::string::npos);
  const CliResult tf32 = run_cli("sweep --model mlp --math tf32 --devices cpu:threads=1,cpu --report " + report);
  CHECK(tf32.exit_code != 0);
  CHECK(tf32.output.find("tf32 is a CUDA math mode") != std::string::npos);
  const CliResult batches = run_cli("sweep --model mlp --batches 4,x --report " + report);
  CHECK(batches.exit_code != 0);
  CHECK(batches.output.find("--batches: 'x'") != std::string::npos);
  const CliResult unknown = run_cli("sweep --model mlp --devices cpu,npu --report " + report);
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.output.find("unknown device 'npu'") != std::string::npos);
  if (!nnlab::cuda_status().usable) {
    const CliResult cuda = run_cli("sweep --model mlp --devices cpu,cuda --report " + report);
    CHECK(cuda.exit_code != 0);
    CHECK(cuda.output.find("device 'cuda': CUDA is not usable here") != std::string::npos);
  }
  const CliResult unwritable = run_cli("sweep --model mlp --devices cpu:threads=1,cpu --batches 1 --steps 1 --report " +
                                       (dir / "no/such/s.html"));
  CHECK(unwritable.exit_code != 0);
  CHECK(unwritable.output.find("does not exist") != std::string::npos);
  CHECK(unwritable.output.find("crossover") == std::string::npos);
  CHECK_FALSE(fs::exists(report));
}
