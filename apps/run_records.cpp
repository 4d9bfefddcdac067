#include "apps/run_records.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace nnlab {

RunRecorder::RunRecorder(const std::string& path) : path_(path) {
  out_.open(path, std::ios::out | std::ios::trunc);
  NNLAB_CHECK(out_.is_open(), "cannot write the metrics file '", path, "': ", std::strerror(errno),
              "; choose a writable path with --metrics");
}

void RunRecorder::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  NNLAB_CHECK(out_.good(), "writing the metrics file '", path_, "' failed (disk full?)");
}

}  // namespace nnlab
