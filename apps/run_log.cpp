#include "apps/run_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "core/error.h"
#include "core/json_nesting.h"

namespace nnlab {

namespace {

namespace fs = std::filesystem;

const char* kWhatItIs = "a run record file is what `nnlab train --metrics FILE` writes";

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  NNLAB_CHECK(fs::exists(path, ec), "run record file '", path, "' does not exist; ", kWhatItIs);
  NNLAB_CHECK(!fs::is_directory(path, ec), "run record file '", path, "' is a folder, not a file; ", kWhatItIs);
  std::ifstream in(path, std::ios::binary);
  NNLAB_CHECK(in.is_open(), "cannot read the run record file '", path, "': ", std::strerror(errno));
  std::string text(std::istreambuf_iterator<char>(in), {});
  NNLAB_CHECK(!in.bad(), "reading the run record file '", path, "' failed: ", std::strerror(errno));
  return text;
}

// A number field of a record; null (a non-finite value, which JSON cannot hold) reads as NaN.
double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  NNLAB_CHECK(it != j.end() && (it->is_number() || it->is_null()), where, " has no number \"", key,
              "\"; the file is damaged or was not written by `nnlab train --metrics`");
  return it->is_null() ? std::nan("") : it->get<double>();
}

EpochRecord epoch_record(const nlohmann::json& j, const std::string& where) {
  EpochRecord e;
  e.epoch = static_cast<int64_t>(number(j, "epoch", where));
  e.steps = static_cast<int64_t>(number(j, "steps", where));
  e.train_loss = number(j, "train_loss", where);
  e.test_accuracy = number(j, "test_accuracy", where);
  e.seconds = number(j, "seconds", where);
  e.images_per_second = number(j, "images_per_second", where);
  const auto phases = j.find("phase_seconds");
  NNLAB_CHECK(phases != j.end() && phases->is_object(), where, " has no \"phase_seconds\"; the file is damaged or was "
              "not written by `nnlab train --metrics`");
  e.data = number(*phases, "data", where);
  e.forward = number(*phases, "forward", where);
  e.backward = number(*phases, "backward", where);
  e.optimizer = number(*phases, "optimizer", where);
  return e;
}

// What a JSON-lines file that is not a train record file probably is, for the message.
std::string other_kind(const nlohmann::json& first) {
  const std::string type = first.value("type", "");
  if (type == "compare" || type == "variant")
    return "it holds the records of `nnlab compare` (its report comes from `nnlab compare --report`)";
  if (first.contains("ratio") && first.contains("batch"))
    return "it holds the records of `nnlab sweep` (its report comes from `nnlab sweep --report`)";
  return "its first record is not a \"run\" record";
}

}  // namespace

RunLog read_run_log(const std::string& path) {
  const std::string text = read_whole_file(path);
  NNLAB_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, "run record file '", path,
              "' is empty: the run wrote nothing (it stopped before it began?)");
  RunLog log;
  log.path = path;
  size_t start = 0;
  for (int64_t line_no = 1; start < text.size(); ++line_no) {
    const size_t end = text.find('\n', start);
    const bool last = end == std::string::npos;
    const std::string line = text.substr(start, last ? std::string::npos : end - start);
    start = last ? text.size() : end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + path + "' line " + std::to_string(line_no);
    check_json_nesting(line, where);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // Records are written whole and flushed, so only a crash while writing the last one
      // (no newline after it) leaves a cut line: the records before it are still good.
      if (last && log.run.is_object()) {
        log.dropped_partial_line = true;
        break;
      }
      fail(where, " is not JSON (syntax error at byte ", e.byte, " of the line); ", kWhatItIs,
           ", one JSON object per line");
    } catch (const nlohmann::json::exception& e) {  // e.g. a number no double holds: 1e999
      fail(where, " is not JSON nnlab can read (", e.what(), "); ", kWhatItIs, ", one JSON object per line");
    }
    NNLAB_CHECK(j.is_object(), where, " is not a JSON object; ", kWhatItIs, ", one JSON object per line");
    if (!log.run.is_object()) {
      NNLAB_CHECK(j.value("type", "") == "run", "'", path, "' is not a train run record file: ", other_kind(j), "; ",
                  kWhatItIs);
      log.run = j;
      continue;
    }
    const std::string type = j.value("type", "");
    if (type == "epoch") {
      log.epochs.push_back(epoch_record(j, where));
    } else if (type == "step") {
      log.steps.push_back({static_cast<int64_t>(number(j, "epoch", where)),
                           static_cast<int64_t>(number(j, "step", where)), number(j, "loss", where)});
    } else {
      fail(where, " is a record of unknown type \"", type, "\" (expected \"epoch\" or \"step\"); ", kWhatItIs);
    }
  }
  NNLAB_CHECK(!log.epochs.empty() || !log.steps.empty(), "run record file '", path,
              "' holds no finished epoch and no step records: the run stopped before its first epoch ended "
              "(--metrics-every N records steps as they happen)");
  return log;
}

void name_runs(std::vector<RunLog>& runs) {
  std::map<std::string, int> uses;
  for (RunLog& r : runs) {
    r.name = fs::path(r.path).stem().string();
    ++uses[r.name];
  }
  for (RunLog& r : runs)
    if (uses[r.name] > 1) r.name = r.path;
}

}  // namespace nnlab
