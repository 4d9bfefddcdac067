// Where fetched data sets live, and how a copy gets there whole or not at all.
//
//   root            NNLAB_DATA_DIR, else $XDG_DATA_HOME/nnlab/datasets, else
//                   ~/.local/share/nnlab/datasets (`nnlab data --data-dir` overrides all three)
//   root/<name>/    an installed data set: its files (data_catalog.h) and SOURCE, one line
//                   saying where they came from
//
// Installing: every file is written into root/.staging-<name>-<pid>/, fsynced and checked
// against its checksum, the labels counted per class; only then is the folder renamed to
// root/<name> (a copy already there is moved aside first and removed after). A failure at
// any point removes the staging folder and leaves root/<name> as it was: a reader never
// sees a half-written or unverified copy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/data_catalog.h"

namespace nnlab {

std::string data_store_root();

// root/<name> when every file of `spec` is there, else "" (sizes checked, not checksums).
std::string installed_data_dir(const DataSetSpec& spec, const std::string& root);

struct DataStatus {
  std::string dir;       // root/<name>
  bool present = false;  // the folder exists with every file
  bool verified = false; // and every checksum matched (only when asked)
  std::string problem;   // what is missing or wrong, "" when nothing
  std::string source;    // the SOURCE line
};
DataStatus check_installed(const DataSetSpec& spec, const std::string& root, bool verify_checksums);

class DataStaging {
 public:
  DataStaging(const DataSetSpec& spec, const std::string& root);
  ~DataStaging();  // removes the staging folder unless committed
  DataStaging(const DataStaging&) = delete;
  DataStaging& operator=(const DataStaging&) = delete;

  const std::string& dir() const { return dir_; }
  // Writes installed file `name` (one of spec.files) and checks its size and checksum.
  void write(const std::string& name, const void* data, size_t n);
  // Checks that every file was written, counts the labels per class against the published
  // counts, records `source`, and moves the folder into place. Returns root/<name>.
  std::string commit(const std::string& source);

 private:
  const DataFile& file_spec(const std::string& name) const;
  const DataSetSpec& spec_;
  std::string root_, dir_;
  std::vector<std::string> written_;
  bool committed_ = false;
};

}  // namespace nnlab
