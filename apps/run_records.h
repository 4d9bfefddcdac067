// Machine-readable run records: one JSON object per line (JSON Lines), flushed as written,
// so a crashed run keeps every record made before the crash.
#pragma once
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace nnlab {

class RunRecorder {
 public:
  RunRecorder() = default;
  // Opens (truncates) path; throws an Error naming the path when it cannot be written.
  explicit RunRecorder(const std::string& path);
  bool enabled() const { return out_.is_open(); }
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace nnlab
