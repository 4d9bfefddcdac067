// Reading a .tar.gz (.tgz) archive member by member: npm's package tarballs and the original
// CIFAR-10 archive. gzip through zlib (which checks the stream's CRC-32 at its end); tar as
// POSIX ustar with GNU long names, the two forms these archives use:
//
//   512-byte header   name[100] mode[8] uid[8] gid[8] size[12] mtime[12] chksum[8] type[1]
//                     linkname[100] magic[6] version[2] uname[32] gname[32] devmajor[8]
//                     devminor[8] prefix[155]; size in octal (or base-256 when its first byte
//                     has the top bit set); chksum = sum of the header's bytes with the chksum
//                     field read as 8 spaces
//   data              size bytes, padded with zeros to a multiple of 512
//   end               two all-zero headers
//
// Everything an archive claims is checked before it is believed: header checksums, sizes
// against the caller's limit, names; a damaged archive ends in an nnlab::Error naming it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nnlab {

struct TarEntry {
  std::string name;   // path inside the archive, e.g. "package/data/train-images-idx3-ubyte"
  int64_t size = 0;   // bytes of data
};

class TarGzReader {
 public:
  // Opens the archive; throws when it cannot be read or is not gzip-compressed.
  explicit TarGzReader(const std::string& path);
  ~TarGzReader();
  TarGzReader(const TarGzReader&) = delete;
  TarGzReader& operator=(const TarGzReader&) = delete;

  // Moves to the next regular file (directories and metadata records are passed over);
  // false at the archive's end, after which the gzip stream has been read to its end and
  // its CRC checked. The previous entry's unread data is skipped.
  bool next(TarEntry& entry);
  // The current entry's data; throws when it is larger than max_bytes or the archive ends early.
  std::vector<uint8_t> read(int64_t max_bytes);

 private:
  void read_exact(void* dst, int64_t n, const char* what);
  void skip_bytes(int64_t n);
  void drain();
  std::string path_;
  void* file_;             // gzFile
  int64_t unread_ = 0;     // data bytes of the current entry not yet read
  int64_t padding_ = 0;    // zero bytes after them
};

}  // namespace nnlab
