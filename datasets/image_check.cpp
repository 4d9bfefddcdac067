#include "datasets/image_check.h"

#include <algorithm>

namespace nnlab {

namespace {

struct Walk {
  const uint8_t* p;
  size_t n;
  bool defined[2][4] = {};  // [class: 0 DC, 1 AC][table id]
  bool progressive = false;
};

// DHT: one or more tables, each  <class|id> <16 counts> <sum(counts) symbols>.
std::string check_dht(Walk& w, size_t begin, size_t end) {
  for (size_t j = begin; j < end;) {
    const int tc = w.p[j] >> 4, th = w.p[j] & 15;
    if (tc > 1 || th > 3) return "a Huffman table has class " + std::to_string(tc) + " and id " + std::to_string(th);
    if (j + 17 > end) return "a Huffman table is cut short";
    int codes = 0;
    for (size_t k = 1; k <= 16; ++k) codes += w.p[j + k];
    if (codes > 256) return "a Huffman table declares " + std::to_string(codes) + " codes (at most 256)";
    w.defined[tc][th] = true;
    j += 17 + static_cast<size_t>(codes);
  }
  return "";
}

// SOS: <ns> ns × <component, DC id|AC id> <Ss> <Se> <Ah|Al>. A baseline scan decodes with
// both tables, a progressive DC scan (Ss = 0) with the DC one, an AC scan with the AC one.
std::string check_sos(const Walk& w, size_t begin, size_t end) {
  const size_t ns = w.p[begin];
  if (begin + 1 + 2 * ns + 3 > end) return "a scan header is cut short";
  const int ss = w.p[begin + 1 + 2 * ns];
  for (size_t c = 0; c < ns; ++c) {
    const int td = w.p[begin + 2 + 2 * c] >> 4, ta = w.p[begin + 2 + 2 * c] & 15;
    const bool need_dc = !w.progressive || ss == 0, need_ac = !w.progressive || ss > 0;
    if (need_dc && (td > 3 || !w.defined[0][td]))
      return "a scan uses DC Huffman table " + std::to_string(td) + ", which the file does not define before it";
    if (need_ac && (ta > 3 || !w.defined[1][ta]))
      return "a scan uses AC Huffman table " + std::to_string(ta) + ", which the file does not define before it";
  }
  return "";
}

// Index of the next marker after entropy-coded data starting at i (0xFF 0x00 is a stuffed
// byte, 0xFF 0xD0..0xD7 a restart marker inside the scan).
size_t skip_entropy_data(const Walk& w, size_t i) {
  for (; i + 1 < w.n; ++i)
    if (w.p[i] == 0xFF && w.p[i + 1] != 0x00 && !(w.p[i + 1] >= 0xD0 && w.p[i + 1] <= 0xD7)) return i;
  return w.n;
}

}  // namespace

std::string jpeg_huffman_problem(const uint8_t* data, size_t size) {
  // SOI: 0xFF 0xD8, possibly after more 0xFF fill bytes (stb accepts those too).
  size_t i = 0;
  while (i < size && data[i] == 0xFF) ++i;
  if (i == 0 || i >= size || data[i] != 0xD8) return "";
  Walk w{data, size};
  ++i;
  while (i + 4 <= size) {
    if (data[i] != 0xFF) return "bytes where a marker should be, at offset " + std::to_string(i);
    if (data[i + 1] == 0xFF) {  // fill byte before a marker
      ++i;
      continue;
    }
    const int marker = data[i + 1];
    if (marker == 0xD9) return "";                                    // EOI
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // markers without a length
      i += 2;
      continue;
    }
    const size_t length = (static_cast<size_t>(data[i + 2]) << 8) | data[i + 3];
    if (length < 2) return "a segment with length " + std::to_string(length);
    const size_t begin = i + 4, end = i + 2 + length;
    // Cut short: stb reads zeros past the end, which can still build a table of > 256 codes.
    if (end > size) return marker == 0xC4 || marker == 0xDA ? "the file ends inside a Huffman table or scan header" : "";
    std::string problem;
    if (marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE) w.progressive = true;
    if (marker == 0xC4) problem = check_dht(w, begin, end);
    if (marker == 0xDA) problem = begin < end ? check_sos(w, begin, end) : "an empty scan header";
    if (!problem.empty()) return problem;
    i = marker == 0xDA ? skip_entropy_data(w, end) : end;
  }
  return "";
}

// PNG: an 8-byte signature, then chunks  <length: 4 bytes big-endian> <type: 4> <data> <CRC: 4>.
// stb_image 2.27 also copies an empty IDAT chunk that comes before any image data into its
// not yet allocated buffer (memcpy to a null pointer, undefined behaviour): PNG allows such a
// chunk, but no encoder writes one, so it is refused rather than handed to stb.
std::string png_chunk_problem(const uint8_t* data, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size < 8 || !std::equal(kSignature, kSignature + 8, data)) return "";
  bool image_data_seen = false;
  for (size_t i = 8; i < size;) {
    if (size - i < 12) return "the file ends inside a chunk header";
    const uint64_t length = (uint64_t{data[i]} << 24) | (uint64_t{data[i + 1]} << 16) | (uint64_t{data[i + 2]} << 8) |
                            data[i + 3];
    const std::string type(reinterpret_cast<const char*>(data + i + 4), 4);
    if (length > size - i - 12)
      return "chunk '" + type + "' claims " + std::to_string(length) + " bytes but the file has " +
             std::to_string(size - i - 12) + " left (truncated or corrupt)";
    if (type == "IEND") return "";
    if (type == "IDAT" && length == 0 && !image_data_seen)
      return "an empty IDAT chunk comes before any image data (stb_image 2.27, which decodes it, cannot read that "
             "safely)";
    if (type == "IDAT") image_data_seen = true;
    i += 12 + static_cast<size_t>(length);
  }
  return "";
}

// BMP: stb reads zeros for pixel rows missing at the end of the file, so a 129-byte file
// "decodes" to a 2048×1629 black image. Uncompressed (and bit-field) pixel data must all be
// present: offset + row bytes (rounded up to 4) × rows ≤ file size. stb reads the compression
// field as a signed int and refuses 1, 2 and >= 4 only, so a negative value (a 47-byte file
// with 0xda000000 there, claiming 3842×12036 pixels) slipped past both checks: every value
// but 0 (none) and 3 (bit fields) is refused here.
std::string bmp_size_problem(const uint8_t* data, size_t size) {
  if (size < 30 || data[0] != 'B' || data[1] != 'M') return "";
  auto u16 = [&](size_t at) { return static_cast<uint32_t>(data[at] | (data[at + 1] << 8)); };
  auto u32 = [&](size_t at) { return u16(at) | (u16(at + 2) << 16); };
  const uint64_t offset = u32(10), header = u32(14);
  int64_t width = 0, height = 0;
  uint64_t bits = 0, compression = 0;
  if (header == 12) {  // BITMAPCOREHEADER
    width = u16(18), height = u16(20), bits = u16(24);
  } else {
    if (size < 34) return "";
    width = static_cast<int32_t>(u32(18)), height = static_cast<int32_t>(u32(22)), bits = u16(28);
    compression = u32(30);
  }
  if (compression != 0 && compression != 3)
    return "compression type " + std::to_string(compression) +
           " is not supported (nnlab reads uncompressed and bit-field BMPs)";
  const uint64_t rows = static_cast<uint64_t>(height < 0 ? -height : height);
  const uint64_t row_bytes = (bits * static_cast<uint64_t>(width < 0 ? -width : width) + 31) / 32 * 4;
  const uint64_t need = offset + row_bytes * rows;
  if (need <= size) return "";
  return "its header claims " + std::to_string(width) + "x" + std::to_string(height) + " pixels at " +
         std::to_string(bits) + " bits (" + std::to_string(need) + " bytes with the header) but the file has " +
         std::to_string(size) + " bytes (truncated)";
}

// JPEG: every 8×8 block of the full-resolution component carries at least a 1-bit DC code
// (baseline and progressive alike; end-of-band runs only shorten AC scans), so a w × h JPEG
// holds at least ⌈w/8⌉·⌈h/8⌉ bits of image data. stb fills what is missing with grey, so a
// 698-byte file claiming 11272×4102 pixels "decoded" (for seconds) to a flat image.
std::string jpeg_size_problem(const uint8_t* data, size_t size, int64_t width, int64_t height) {
  if (size < 2 || data[0] != 0xFF || data[1] != 0xD8) return "";
  const uint64_t min_bytes = ((width + 7) / 8) * ((height + 7) / 8) / 8;
  if (size >= min_bytes) return "";
  return "its header claims " + std::to_string(width) + "x" + std::to_string(height) +
         " pixels, which take at least " + std::to_string(min_bytes) + " bytes of image data, but the file has " +
         std::to_string(size) + " bytes (truncated)";
}

}  // namespace nnlab
