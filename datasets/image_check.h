// Structural checks of PNG and JPEG files run before stb_image sees them.
//
// Debian 12's stb_image (2.27) trusts a JPEG's Huffman tables: a scan that names a table the
// file never defined reads uninitialised memory and indexes far outside the table (a crash
// found by tests/fuzz/fuzz_image.cpp), and a table declaring more than 256 codes overruns its
// arrays (upstream stb issues 1289 and 1291, fixed after 2.27). This walk over the file's
// marker segments refuses both before any decoding, so nnlab never relies on the decoder for
// its memory safety on those paths.
//
// PNG: stb grows its buffer for the compressed data to whatever an IDAT chunk's length
// claims before checking that the bytes exist, so a 200-byte file could make it allocate
// 2 GiB (found by the same fuzzer). Every chunk must fit in the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nnlab {

// For a file starting with the JPEG SOI marker (after any 0xFF fill bytes): "" when every Huffman table holds at most 256
// codes and every scan uses only tables defined before it, else what is wrong. Other files: "".
std::string jpeg_huffman_problem(const uint8_t* data, size_t size);

// For a file starting with the PNG signature: "" when every chunk up to IEND lies within the
// file and no empty IDAT chunk precedes the image data, else what is wrong. Other files: "".
std::string png_chunk_problem(const uint8_t* data, size_t size);

// For a BMP file: "" unless its uncompressed pixel rows run past the end of the file (stb
// would fill them with zeros and return a plausible-looking image) or its compression type is
// neither 0 (none) nor 3 (bit fields).
std::string bmp_size_problem(const uint8_t* data, size_t size);

// For a JPEG whose header claims width × height pixels: "" unless the file is too short to
// hold even one bit per 8×8 block (stb would fill the rest and return a flat image).
std::string jpeg_size_problem(const uint8_t* data, size_t size, int64_t width, int64_t height);

}  // namespace nnlab
