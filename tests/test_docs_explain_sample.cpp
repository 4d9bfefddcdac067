// The guide's sample of `nnlab explain` (docs/backprop-to-kernels.md, "nnlab explain on this
// machine") stays true: its nodes (direction, layer, op) and every kernel line under them —
// each call's family, shapes and the convolution plans with their reasons — are what the
// program prints today. The times differ from run to run and are not compared. When the
// guide's sample and the code part, this fails until the sample is recorded again.
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "devices/host_cpu.h"

namespace {

const std::string kCommand = "nnlab explain --model cnn --batch 64 --threads 2";

// The lines that do not depend on time: "fwd c1+pool1+relu1 Conv2d" for a node, the whole
// line for a kernel call (the CPU prints no per-call time).
std::vector<std::string> structure(const std::string& output) {
  static const std::regex node(R"(^\d+\s+(fwd|bwd|opt|comm)\s+(\S+)\s+(\S+))");
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu: totals per layer", 0) == 0) break;
    if (std::regex_search(line, m, node)) lines.push_back(m[1].str() + " " + m[2].str() + " " + m[3].str());
    else if (line.rfind("      ", 0) == 0) lines.push_back(line.substr(6));
    else if (line.rfind("fuse_epilogues: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

// The sample in the guide: the fenced block that starts with the command.
std::string guide_sample() {
  const std::string guide = nnlab_test::read_text(std::string(NNLAB_TEST_DIR) + "/../docs/backprop-to-kernels.md");
  const size_t start = guide.find("$ " + kCommand + "\n");
  if (start == std::string::npos) return "";
  const size_t end = guide.find("```", start);
  return guide.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

TEST_CASE("the guide's explain sample shows the nodes and kernel calls explain prints today", "[explain][docs]") {
  const std::string sample = guide_sample();
  REQUIRE_FALSE(sample.empty());
  // The sample was recorded with the AVX-512 kernels (its f2 forward is small_gemm_nt's); on a
  // CPU without them only the nodes can match.
  const bool same_kernels = nnlab::host_cpu::has_avx512();
  const nnlab_test::CliResult r = nnlab_test::run_cli(kCommand.substr(std::string("nnlab ").size()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> want = structure(sample), got = structure(r.output);
  REQUIRE(want.size() > 20);
  if (!same_kernels) {
    WARN("this CPU has no AVX-512: the guide's kernel lines are not compared, only its nodes");
    const auto nodes_only = [](std::vector<std::string> lines) {
      std::vector<std::string> nodes;
      for (const std::string& l : lines)
        if (l.rfind("fwd ", 0) == 0 || l.rfind("bwd ", 0) == 0 || l.rfind("opt ", 0) == 0) nodes.push_back(l);
      return nodes;
    };
    want = nodes_only(want);
    got = nodes_only(got);
  }
  CHECK(got == want);
}
