// A bound on how deeply a JSON text nests, checked before the text is parsed. Files nnlab reads
// (model files, checkpoint headers and metadata, run records) come from users and may be
// hostile; their real depth is small (a model file with a residual block inside a sequential
// is 7 levels), but a valid JSON text of 100,000 nested brackets made the parser or the code
// walking its result run out of stack (a segmentation fault with no message).
#pragma once
#include <cstddef>
#include <string>

namespace nnlab {

// Deeper than any file nnlab writes or documents, shallow enough for every recursive walk.
constexpr int kMaxJsonNesting = 64;

// The deepest nesting of '[' and '{' in `text` (brackets inside strings do not count).
int json_nesting(const std::string& text);

// Throws nnlab::Error "<origin> nests its JSON N levels deep; nnlab reads at most 64 ..." when
// `text` is deeper than kMaxJsonNesting.
void check_json_nesting(const std::string& text, const std::string& origin);

}  // namespace nnlab
