#include "datasets/tar_gz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace nnlab {

namespace {

constexpr int64_t kBlock = 512;
// A GNU long name is the data of a 'L' record; no real path comes near this.
constexpr int64_t kMaxLongName = 4096;

gzFile gz(void* f) { return static_cast<gzFile>(f); }

// A numeric field: octal digits (spaces and NULs around them), or base-256 big-endian when the
// first byte's top bit is set (GNU's form for sizes of 8 GiB and more).
bool parse_number(const unsigned char* field, size_t width, int64_t& value) {
  value = 0;
  if (field[0] & 0x80) {
    for (size_t i = 1; i < width; ++i) {
      if (value > (INT64_MAX >> 8)) return false;
      value = (value << 8) | field[i];
    }
    return (field[0] & 0x7f) == 0;
  }
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value > (INT64_MAX >> 3)) return false;
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  for (; i < width; ++i)
    if (field[i] != ' ' && field[i] != '\0') return false;
  return any;
}

std::string field_string(const unsigned char* field, size_t width) {
  const auto* end = static_cast<const unsigned char*>(std::memchr(field, 0, width));
  return std::string(reinterpret_cast<const char*>(field), end ? static_cast<size_t>(end - field) : width);
}

// The header's checksum: all 512 bytes summed, the chksum field (148..155) counted as spaces.
int64_t header_sum(const unsigned char* h) {
  int64_t sum = 0;
  for (int64_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum;
}

}  // namespace

TarGzReader::TarGzReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
  NNLAB_CHECK(file_ != nullptr, "cannot open archive ", path, ": ", std::strerror(errno));
  gzbuffer(gz(file_), 1 << 20);
  // zlib reads a file that is not gzip as plain bytes ("direct"); a package tarball must be gzip.
  unsigned char first = 0;
  const int got = gzread(gz(file_), &first, 1);
  if (got != 1 || gzdirect(gz(file_))) {
    gzclose(gz(file_));
    file_ = nullptr;
    fail("archive ", path, got != 1 ? " is empty" : " is not gzip-compressed",
         "; expected a .tgz / .tar.gz file (an npm package tarball or the original archive)");
  }
  gzungetc(first, gz(file_));
}

TarGzReader::~TarGzReader() {
  if (file_) gzclose(gz(file_));
}

void TarGzReader::read_exact(void* dst, int64_t n, const char* what) {
  auto* out = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const auto want = static_cast<unsigned>(std::min<int64_t>(n, int64_t{1} << 30));
    const int got = gzread(gz(file_), out, want);
    if (got <= 0) {
      int code = Z_OK;
      const char* message = gzerror(gz(file_), &code);
      fail("archive ", path_, " is damaged: ",
           code != Z_OK && code != Z_STREAM_END ? std::string(message)
                                                : std::string("it ends inside ") + what + " (truncated?)",
           "; fetch it again");
    }
    out += got;
    n -= got;
  }
}

void TarGzReader::skip_bytes(int64_t n) {
  unsigned char scratch[64 * 1024];
  while (n > 0) {
    const int64_t step = std::min<int64_t>(n, sizeof scratch);
    read_exact(scratch, step, "a member's data");
    n -= step;
  }
}

void TarGzReader::drain() {
  // Reading past the tar's end to the gzip stream's end makes zlib check its CRC-32 and length.
  unsigned char scratch[64 * 1024];
  int got = 0;
  while ((got = gzread(gz(file_), scratch, sizeof scratch)) > 0) {
  }
  int code = Z_OK;
  const char* message = gzerror(gz(file_), &code);
  NNLAB_CHECK(got == 0 && (code == Z_OK || code == Z_STREAM_END), "archive ", path_, " is damaged: ", message,
              "; fetch it again");
}

bool TarGzReader::next(TarEntry& entry) {
  skip_bytes(unread_ + padding_);
  unread_ = padding_ = 0;
  std::string long_name;
  for (;;) {
    unsigned char h[kBlock];
    read_exact(h, kBlock, "a header");
    if (std::all_of(h, h + kBlock, [](unsigned char c) { return c == 0; })) {
      drain();
      return false;
    }
    int64_t claimed_sum = 0, size = 0;
    NNLAB_CHECK(parse_number(h + 148, 8, claimed_sum) && claimed_sum == header_sum(h), "archive ", path_,
                " is damaged: a tar header's checksum does not match its bytes; fetch it again");
    NNLAB_CHECK(parse_number(h + 124, 12, size) && size >= 0, "archive ", path_,
                " is damaged: a tar header has no valid size");
    const char type = static_cast<char>(h[156]);
    const int64_t padding = (kBlock - size % kBlock) % kBlock;
    if (type == 'L') {  // GNU: the next header's name is this record's data
      NNLAB_CHECK(size > 0 && size <= kMaxLongName, "archive ", path_, " has a long name of ", size,
                  " bytes; names are at most ", kMaxLongName);
      std::string name(static_cast<size_t>(size), '\0');
      read_exact(name.data(), size, "a long name");
      skip_bytes(padding);
      long_name = name.c_str();
      continue;
    }
    if (type != '0' && type != '\0') {  // directory, link, pax metadata: not a file we read
      skip_bytes(size + padding);
      long_name.clear();
      continue;
    }
    std::string name = long_name.empty() ? field_string(h, 100) : long_name;
    const std::string prefix = std::memcmp(h + 257, "ustar", 5) == 0 ? field_string(h + 345, 155) : "";
    if (long_name.empty() && !prefix.empty()) name = prefix + "/" + name;
    entry = TarEntry{name, size};
    unread_ = size;
    padding_ = padding;
    return true;
  }
}

std::vector<uint8_t> TarGzReader::read(int64_t max_bytes) {
  NNLAB_CHECK(unread_ <= max_bytes, "archive ", path_, " holds a member of ", unread_, " bytes where at most ",
              max_bytes, " are expected: it is not the package nnlab expects");
  std::vector<uint8_t> data(static_cast<size_t>(unread_));
  // Grown as bytes arrive would cost copies; the claim is already bounded by max_bytes.
  read_exact(data.data(), unread_, "a member's data");
  unread_ = 0;
  return data;
}

}  // namespace nnlab
