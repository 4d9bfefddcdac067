// Checksums of files and byte ranges (OpenSSL's EVP digests): how a fetched data set proves it
// is the one its publisher released.
//
//   MD5      32 hex digits: what the CIFAR-10 and MNIST/Fashion-MNIST authors publish
//   SHA-256  64 hex digits: what nnlab records where nothing is published (decompressed files)
//   SHA-512  the npm registry's "integrity" of a package tarball: "sha512-" + base64 of the digest
//
// A digest is compared as text; the algorithm follows from the expected value's form, so a
// checksum table can mix them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nnlab {

enum class DigestKind { Md5, Sha256, Sha512 };

// Incremental digest: feed bytes in any number of pieces, then read the lowercase hex digest.
class Digest {
 public:
  explicit Digest(DigestKind kind);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void update(const void* data, size_t n);
  std::string hex();     // ends the digest; call once
  std::string base64();  // ends the digest; call once (npm's integrity form, without the prefix)

 private:
  void* context_;  // EVP_MD_CTX
  std::string finish_raw();
};

// The kind an expected value names: 32 hex → MD5, 64 hex → SHA-256, "sha512-..." → SHA-512.
// Throws nnlab::Error for anything else.
DigestKind digest_kind_of(const std::string& expected);

// The digest of a whole file in the same form as `expected` (hex, or "sha512-" + base64).
// Throws nnlab::Error naming the file when it cannot be read.
std::string file_digest_like(const std::string& path, const std::string& expected);
std::string bytes_digest_like(const void* data, size_t n, const std::string& expected);

}  // namespace nnlab
