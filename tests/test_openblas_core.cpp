// OpenBLAS's core of kernels against the CPU (devices/cpu/openblas_core.h): the ranking and the
// choice as pure functions, then the program end to end. The end-to-end cases force OpenBLAS
// onto Prescott (SSE3), as Debian's OpenBLAS 0.3.21 chose on a Cooper Lake Xeon, and check that
// `nnlab` ends on the best core for the CPU it runs on, says so, and records it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "cli_support.h"
#include "devices/cpu/openblas_core.h"

using namespace nnlab;
using nnlab_test::CliResult;
using nnlab_test::run_shell;

namespace {

CpuVectorSupport cpu_with(bool avx, bool avx2_fma, bool avx512, bool bf16) { return {avx, avx2_fma, avx512, bf16}; }
const CpuVectorSupport kSseOnly = cpu_with(false, false, false, false);
const CpuVectorSupport kAvx = cpu_with(true, false, false, false);
const CpuVectorSupport kAvx2 = cpu_with(true, true, false, false);
const CpuVectorSupport kAvx512 = cpu_with(true, true, true, false);
const CpuVectorSupport kAvx512Bf16 = cpu_with(true, true, true, true);

// The best core for the CPU these tests run on; "" when Prescott is not older there (a CPU
// without AVX, which nnlab's x86-64-v3 build refuses anyway).
std::string best_here() {
  const CpuVectorSupport cpu = cpu_vector_support();
  return openblas_core_is_older("Prescott", cpu) ? best_openblas_core(cpu) : "";
}

// The core named in `nnlab devices`'s line "OpenBLAS: OpenBLAS 0.3.21 ... DYNAMIC_ARCH ... Core MAX_THREADS=64".
std::string config_line(const std::string& output) {
  const auto at = output.find("OpenBLAS: ");
  REQUIRE(at != std::string::npos);
  return output.substr(at, output.find('\n', at) - at);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The best rate `nnlab sgemm` printed ("... median 220.5 GFLOP/s, best 243.7 GFLOP/s").
double best_rate(const CliResult& r) {
  const auto at = r.output.find("best ");
  REQUIRE(at != std::string::npos);
  return std::stod(r.output.substr(at + 5));
}

const std::string kCli = NNLAB_CLI_PATH;

}  // namespace

TEST_CASE("openblas_core: core names rank by the instructions of their kernels, in any case", "[openblas_core]") {
  const struct {
    const char* core;
    BlasIsa isa;
  } table[] = {
      {"Prescott", BlasIsa::sse},       {"Core2", BlasIsa::sse},         {"Penryn", BlasIsa::sse},
      {"Dunnington", BlasIsa::sse},     {"Nehalem", BlasIsa::sse},       {"Atom", BlasIsa::sse},
      {"Opteron", BlasIsa::sse},        {"Opteron_SSE3", BlasIsa::sse},  {"Barcelona", BlasIsa::sse},
      {"Bobcat", BlasIsa::sse},         {"Nano", BlasIsa::sse},          {"Sandybridge", BlasIsa::avx},
      {"Bulldozer", BlasIsa::avx},      {"Piledriver", BlasIsa::avx},    {"Haswell", BlasIsa::avx2},
      {"Zen", BlasIsa::avx2},           {"Steamroller", BlasIsa::avx2},  {"Excavator", BlasIsa::avx2},
      {"SkylakeX", BlasIsa::avx512},    {"Cooperlake", BlasIsa::avx512}, {"SapphireRapids", BlasIsa::avx512},
      {"PRESCOTT", BlasIsa::sse},       {"haswell", BlasIsa::avx2},      {"skylakex", BlasIsa::avx512},
      // Names nnlab does not know are left alone: never ranked, never replaced.
      {"Unknown", BlasIsa::unknown},    {"armv8", BlasIsa::unknown},     {"", BlasIsa::unknown},
      {"Haswel", BlasIsa::unknown},     {"SkylakeXX", BlasIsa::unknown}, {"NEOVERSEN1", BlasIsa::unknown},
  };
  for (const auto& row : table) {
    INFO(row.core);
    CHECK(openblas_core_isa(row.core) == row.isa);
  }
  CHECK(std::string(openblas_core_instructions("prescott")) == "SSE3");
  CHECK(std::string(openblas_core_instructions("Cooperlake")) == "AVX-512 BF16");
  CHECK(std::string(openblas_core_instructions("armv8")).empty());
}

TEST_CASE("openblas_core: the best core for a CPU, and which cores are older than it", "[openblas_core]") {
  CHECK(std::string(best_openblas_core(kAvx512Bf16)) == "Cooperlake");
  CHECK(std::string(best_openblas_core(kAvx512)) == "SkylakeX");
  CHECK(std::string(best_openblas_core(kAvx2)) == "Haswell");
  CHECK(std::string(best_openblas_core(kAvx)) == "Sandybridge");
  CHECK(std::string(best_openblas_core(kSseOnly)).empty());
  // AVX-512 without AVX2 and FMA cannot happen on a real CPU; the tiers must not skip one.
  CHECK(std::string(cpu_vector_words(kAvx512Bf16)) == "AVX-512 BF16");
  CHECK(std::string(cpu_vector_words(kSseOnly)) == "no AVX");

  const struct {
    const char* core;
    CpuVectorSupport cpu;
    bool older;
  } table[] = {
      {"Prescott", kAvx512Bf16, true},     {"Haswell", kAvx512Bf16, true},    {"Zen", kAvx512, true},
      {"SkylakeX", kAvx512Bf16, false},    {"Cooperlake", kAvx512, false},    {"SapphireRapids", kAvx512Bf16, false},
      {"Sandybridge", kAvx2, true},        {"Nehalem", kAvx2, true},          {"Haswell", kAvx2, false},
      {"Zen", kAvx2, false},               {"Excavator", kAvx2, false},       {"Prescott", kAvx, true},
      {"Bulldozer", kAvx, false},          {"Prescott", kSseOnly, false},     {"Core2", kSseOnly, false},
      // A newer core than the CPU runs is not nnlab's to correct; an unknown one is left alone.
      {"SkylakeX", kAvx2, false},          {"armv8", kAvx512Bf16, false},     {"", kAvx512Bf16, false},
      {"prescott", kAvx512, true},
  };
  for (const auto& row : table) {
    INFO(row.core << " on a CPU with " << cpu_vector_words(row.cpu));
    CHECK(openblas_core_is_older(row.core, row.cpu) == row.older);
  }
}

TEST_CASE("devices: OPENBLAS_CORETYPE=Prescott ends on the best core for this CPU, and says so", "[cli][openblas_core]") {
  const std::string best = best_here();
  if (best.empty()) return;
  const CliResult r = run_shell("OPENBLAS_CORETYPE=Prescott " + kCli + " devices");
  REQUIRE(r.exit_code == 0);
  INFO(r.output);
  CHECK(contains(config_line(r.output), " " + best + " "));
  CHECK_FALSE(contains(config_line(r.output), "Prescott"));
  CHECK(contains(r.output, "OPENBLAS_CORETYPE=Prescott asked OpenBLAS for Prescott (SSE3) kernels on a CPU with "));
  CHECK(contains(r.output, "; restarted with OPENBLAS_CORETYPE=" + best));
  CHECK_FALSE(contains(r.output, "warning"));

  // Left to itself OpenBLAS may choose well or not (Prescott on the Cooper Lake Xeon): either
  // way the program ends on a core of the CPU's best tier, which is OpenBLAS's own choice where
  // that is one (SkylakeX on a Sapphire Rapids Xeon: Cooperlake's float32 kernels).
  const CliResult own = run_shell("env -u OPENBLAS_CORETYPE " + kCli + " devices");
  REQUIRE(own.exit_code == 0);
  const std::string own_line = config_line(own.output);
  const size_t core_end = own_line.rfind(" MAX_THREADS");
  REQUIRE(core_end != std::string::npos);
  const size_t core_begin = own_line.rfind(' ', core_end - 1) + 1;
  const std::string own_core = own_line.substr(core_begin, core_end - core_begin);
  INFO("OpenBLAS's own core: " << own_core);
  CHECK_FALSE(openblas_core_is_older(own_core, cpu_vector_support()));
  CHECK((contains(own.output, "its own choice") || contains(own.output, "; restarted with OPENBLAS_CORETYPE=" + best)));
}

TEST_CASE("devices: NNLAB_OPENBLAS_CORETYPE=keep leaves a forced core, and other values are refused", "[cli][openblas_core]") {
  if (best_here().empty()) return;
  const CliResult kept = run_shell("NNLAB_OPENBLAS_CORETYPE=keep OPENBLAS_CORETYPE=Prescott " + kCli + " devices");
  REQUIRE(kept.exit_code == 0);
  INFO(kept.output);
  CHECK(contains(config_line(kept.output), " Prescott "));
  CHECK(contains(kept.output, "kept as NNLAB_OPENBLAS_CORETYPE=keep asks (OPENBLAS_CORETYPE=" + best_here()));
  CHECK_FALSE(contains(kept.output, "warning"));  // the user's choice: said once in the report, no warning

  const CliResult bad = run_shell("NNLAB_OPENBLAS_CORETYPE=Haswell " + kCli + " devices");
  CHECK(bad.exit_code == 1);
  CHECK(bad.output ==
        "nnlab: error: NNLAB_OPENBLAS_CORETYPE='Haswell' is not a choice: use keep (leave OpenBLAS on the core it runs) "
        "or auto (the default: restart on the best core for this CPU when OpenBLAS runs an older one)\n");
}

TEST_CASE("devices: a restart happens once, and still on an older core after it nnlab warns once and runs",
          "[cli][openblas_core]") {
  const std::string best = best_here();
  if (best.empty()) return;
  // The marker a restart leaves, with OpenBLAS still on Prescott: as if this OpenBLAS lacked the
  // best core. A second restart would loop forever (CTest's timeout would end it).
  const CliResult r = run_shell("NNLAB_OPENBLAS_RESTARTED=Prescott OPENBLAS_CORETYPE=Prescott " + kCli + " devices");
  REQUIRE(r.exit_code == 0);
  INFO(r.output);
  CHECK(contains(config_line(r.output), " Prescott "));
  const std::string fact = "OpenBLAS runs Prescott (SSE3) on a CPU with ";
  CHECK(contains(r.output, "(even after a restart with OPENBLAS_CORETYPE=" + best + ", which this OpenBLAS may lack)"));
  const auto warning = r.output.find("nnlab: warning: " + fact);
  CHECK(warning != std::string::npos);
  CHECK(r.output.find("nnlab: warning:", warning + 1) == std::string::npos);
}

TEST_CASE("train: the log and the run record carry the corrected core", "[cli][openblas_core]") {
  const std::string best = best_here();
  if (best.empty()) return;
  const nnlab_test::TempDir dir("nnlab_openblas_core");
  const std::string metrics = dir / "run.jsonl";
  const CliResult r = run_shell("OPENBLAS_CORETYPE=Prescott " + kCli +
                                " train --model mlp --data synthetic-cifar10 --max-steps 1 --threads 1 --metrics " + metrics);
  REQUIRE(r.exit_code == 0);
  INFO(r.output);
  CHECK(contains(r.output, "; restarted with OPENBLAS_CORETYPE=" + best));
  std::ifstream in(metrics);
  std::string first;
  REQUIRE(std::getline(in, first));
  const auto core = nlohmann::json::parse(first)["environment"]["openblas_core"];
  CHECK(core["core"] == best);
  CHECK(core["before"] == "Prescott");
  CHECK(core["forced"] == true);
  CHECK(core["older"] == false);
  CHECK(core["action"] == "restarted");
  CHECK(contains(core["summary"].get<std::string>(), "restarted with OPENBLAS_CORETYPE=" + best));
}

// The rate itself, loosely: Prescott's kernels ran 5x slower than the best here (93 against
// 468 GFLOP/s at 2100³ on 2 threads) and on the Xeon, so "within 2x of the normal run" still
// catches the fault on a busy 2-core machine. The best of 12 products, runs alternated, and one
// thread, so a neighbouring test moves both alike. 2100³ because libxsmm takes square products
// up to 2048³ (devices/cpu/gemm_libxsmm.cpp) and this must measure OpenBLAS.
TEST_CASE("sgemm: OPENBLAS_CORETYPE=Prescott runs at the normal rate", "[cli][openblas_core]") {
  if (best_here().empty()) return;
  const std::string sgemm = kCli + " sgemm --size 2100 --threads 1";
  double normal = 0, forced = 0;
  for (int round = 0; round < 2; ++round) {
    const CliResult n = run_shell("env -u OPENBLAS_CORETYPE " + sgemm);
    const CliResult f = run_shell("OPENBLAS_CORETYPE=Prescott " + sgemm);
    REQUIRE(n.exit_code == 0);
    REQUIRE(f.exit_code == 0);
    normal = std::max(normal, best_rate(n));
    forced = std::max(forced, best_rate(f));
  }
  INFO("best GFLOP/s: normal " << normal << ", OPENBLAS_CORETYPE=Prescott " << forced);
  CHECK(forced * 2 >= normal);
}
