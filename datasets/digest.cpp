#include "datasets/digest.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace nnlab {

namespace {

const EVP_MD* evp_of(DigestKind kind) {
  switch (kind) {
    case DigestKind::Md5: return EVP_md5();
    case DigestKind::Sha256: return EVP_sha256();
    case DigestKind::Sha512: return EVP_sha512();
  }
  return nullptr;
}

bool is_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

const char kNpmPrefix[] = "sha512-";

std::string finish_like(Digest& d, const std::string& expected) {
  return digest_kind_of(expected) == DigestKind::Sha512 ? kNpmPrefix + d.base64() : d.hex();
}

}  // namespace

Digest::Digest(DigestKind kind) : context_(EVP_MD_CTX_new()) {
  NNLAB_CHECK(context_ != nullptr && EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), evp_of(kind), nullptr) == 1,
              "OpenSSL could not start a checksum (out of memory?)");
}

Digest::~Digest() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Digest::update(const void* data, size_t n) {
  NNLAB_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data, n) == 1, "OpenSSL checksum update failed");
}

std::string Digest::finish_raw() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  NNLAB_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), out, &n) == 1, "OpenSSL checksum failed");
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string Digest::hex() {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : finish_raw()) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

std::string Digest::base64() {
  const std::string raw = finish_raw();
  std::vector<unsigned char> out(4 * ((raw.size() + 2) / 3) + 1);
  const int n = EVP_EncodeBlock(out.data(), reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  return std::string(reinterpret_cast<const char*>(out.data()), static_cast<size_t>(n));
}

DigestKind digest_kind_of(const std::string& expected) {
  if (expected.rfind(kNpmPrefix, 0) == 0) return DigestKind::Sha512;
  if (expected.size() == 32 && is_hex(expected)) return DigestKind::Md5;
  if (expected.size() == 64 && is_hex(expected)) return DigestKind::Sha256;
  fail("'", expected, "' is not a checksum nnlab knows: 32 hex digits (MD5), 64 (SHA-256) or sha512-<base64>");
}

std::string file_digest_like(const std::string& path, const std::string& expected) {
  std::ifstream in(path, std::ios::binary);
  NNLAB_CHECK(in.is_open(), "cannot open ", path, " to check its checksum: ", std::strerror(errno));
  Digest d(digest_kind_of(expected));
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    d.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  NNLAB_CHECK(in.eof(), "reading ", path, " failed while checking its checksum: ", std::strerror(errno));
  return finish_like(d, expected);
}

std::string bytes_digest_like(const void* data, size_t n, const std::string& expected) {
  Digest d(digest_kind_of(expected));
  d.update(data, n);
  return finish_like(d, expected);
}

}  // namespace nnlab
