// `nnlab sweep` end to end on the CPU (two thread counts as the two "devices"): the table
// over batch sizes and widths, the crossover line, the JSON records, the self-contained
// report, and its refusals.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>

#include "cli_support.h"
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "devices/registry.h"

namespace fs = std::filesystem;

using nnlab_test::run_cli;
using nnlab_test::CliResult;
using nnlab_test::read_text;

TEST_CASE("sweep measures images/s over batches and widths with a crossover verdict", "[sweep]") {
  nnlab_test::TempDir dir("nnlab_cmd");
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
  CHECK(html.find("<script src") == std::string::npos);  // its one script is inline
}

TEST_CASE("sweep measures a bf16 variant beside a float32 one", "[sweep][precision]") {
  const CliResult r = run_cli("sweep --model mlp --devices cpu:threads=1,cpu:threads=1:precision=bf16 --batches 4 "
                              "--steps 1 --warmup 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("cpu:threads=1:precision=bf16") != std::string::npos);
  const CliResult bad = run_cli("sweep --model mlp --devices cpu,cpu:precision=fp16 --batches 4 --steps 1");
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("precision must be fp32 or bf16, got 'fp16'") != std::string::npos);
}

TEST_CASE("sweep refuses what it cannot measure", "[sweep]") {
  nnlab_test::TempDir dir("nnlab_cmd");
  const std::string report = dir / "s.html";
  const CliResult file = run_cli("sweep --model-file " + (dir / "none.json") + " --devices cpu:threads=1,cpu --report " +
                                 report);
  CHECK(file.exit_code != 0);
  CHECK(file.output.find("cannot open model file " + (dir / "none.json")) != std::string::npos);
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
