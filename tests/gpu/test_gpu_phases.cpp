// train's phases on CUDA come from the device's clock (apps/phase_events.h): CUDA events at
// each phase's end, read where the host waits anyway. The phases of an epoch then add up to
// its seconds, eager or with the step as one graph, where host time around each part would
// only time the queueing (the rest landing in whichever read waits for the device).
#include "gpu/gpu_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_support.h"

TEST_CASE("gpu: train's phases are the device's time and add up to the epoch", "[gpu][phases][cli]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnlab_phases_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const bool graphs : {false, true}) {
    INFO((graphs ? "one graph per step" : "eager steps"));
    const std::string metrics = (dir / (graphs ? "graphs.jsonl" : "eager.jsonl")).string();
    // --log-interval 5: the phases are also read at each log line, not only at the epoch's end
    const nnlab_test::CliResult r = nnlab_test::run_cli(
        "train --device cuda --model mlp --batch 16 --epochs 1 --max-steps 12 --test-images 32 --log-interval 5 "
        "--metrics " + metrics + (graphs ? " --cuda-graphs on --data-on-device on" : " --cuda-graphs off"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::ifstream in(metrics);
    bool seen = false;
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] != "epoch") continue;
      seen = true;
      const auto& p = j["phase_seconds"];
      const double data = p["data"], forward = p["forward"], backward = p["backward"], optimizer = p["optimizer"];
      const double sum = data + forward + backward + optimizer + p["allreduce"].get<double>();
      const double seconds = j["seconds"];
      INFO("phases " << p.dump() << ", epoch " << seconds << " s");
      // From the epoch's first mark to its last step's end: all of the epoch but its set-up
      // and the final read.
      CHECK(sum <= seconds);
      CHECK(sum >= 0.8 * seconds);
      CHECK(forward > 0);
      CHECK(optimizer > 0);
      if (graphs) CHECK(backward < forward);  // the replay holds the backward pass
      else CHECK(backward > 0);
    }
    CHECK(seen);
  }
  fs::remove_all(dir);
}
