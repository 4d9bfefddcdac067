#include "apps/train_report.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <utility>

#include <spdlog/spdlog.h>

#include "apps/report_html.h"
#include "apps/run_report.h"
#include "core/error.h"

namespace nnlab {

TrainReport::TrainReport(std::string output, TrainConfig& config) : output_(std::move(output)) {
  if (output_.empty()) return;
  check_writable(output_, "--report");
  if (!config.metrics.empty()) {
    records_ = config.metrics;
    return;
  }
  const std::filesystem::path folder = std::filesystem::temp_directory_path();
  records_ = (folder / "nnlab-records-XXXXXX").string();
  const int fd = ::mkstemp(records_.data());
  NNLAB_CHECK(fd >= 0, "--report: cannot create a scratch file for the run records in ", folder.string(),
              "; add --metrics FILE to keep them in a file of your choice");
  ::close(fd);
  scratch_ = true;
  config.metrics = records_;
}

TrainReport::~TrainReport() {
  if (scratch_) std::remove(records_.c_str());
}

void TrainReport::write() const {
  write_train_report(records_, !scratch_, output_);
  spdlog::info("wrote the report {}", output_);
}

void TrainReport::around(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception&) {
    if (!output_.empty()) {
      try {
        write();
      } catch (const std::exception& e) {
        spdlog::warn("no report: {}", e.what());
      }
    }
    throw;
  }
  if (!output_.empty()) write();
}

}  // namespace nnlab
