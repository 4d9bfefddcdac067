// The guides' code links stay true: every relative link in README.md and docs/*.md names a
// file that exists, carries no line anchor (#L69 drifts as soon as the file changes), and
// every symbol the link names — a `code` span in its text, or one written right after it,
// "[file](../file) `symbol`" — occurs in that file as a whole word.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = fs::path(NNLAB_TEST_DIR).parent_path();

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `word` occurs in `text` not as part of a longer identifier.
bool contains_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !is_word_char(text[at - 1]);
    const size_t end = at + word.size();
    if (starts && (end == text.size() || !is_word_char(text[end]))) return true;
  }
  return false;
}

// The identifier a code span names ("Linear::forward", "gemm" of "gemm(false, …)"), or ""
// when the span is not one (a path, a command line).
std::string symbol_of(const std::string& span) {
  static const std::regex identifier(R"(^([A-Za-z_][A-Za-z0-9_]*(::~?[A-Za-z_][A-Za-z0-9_]*)*)(\(.*\))?$)");
  std::smatch m;
  return std::regex_match(span, m, identifier) ? m[1].str() : std::string();
}

// What is wrong with the links of one Markdown file (`text`, found at `doc`): empty when all hold.
std::vector<std::string> link_problems(const fs::path& doc, const std::string& text) {
  // A label of at most 300 characters (the longest today is 80): libstdc++'s matcher recurses
  // once per character a repetition takes, and an unbounded [^\]]* ran from the '[' of
  // docs/distributed.md's half-open interval [⌊b·r/N⌋, ...) 24,776 characters to the next ']',
  // deep enough to overflow an 8 MB stack under AddressSanitizer.
  static const std::regex link(R"(\[([^\]]{0,300})\]\(([^)\s]+)\)( `([^`]+)`)?)");
  static const std::regex code_span("`([^`]+)`");
  std::vector<std::string> problems;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    std::string target = m[2].str();
    if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind("mailto:", 0) == 0 ||
        target[0] == '#')
      continue;
    const std::string where = doc.filename().string() + ": [" + m[1].str() + "](" + target + ")";
    const size_t hash = target.find('#');
    if (hash != std::string::npos) {
      if (std::regex_match(target.substr(hash + 1), std::regex("L[0-9]+(-L[0-9]+)?")))
        problems.push_back(where + ": a line anchor; link the file and name the symbol instead");
      target.resize(hash);
    }
    const fs::path file = doc.parent_path() / target;
    if (!fs::exists(file)) {
      problems.push_back(where + ": no file " + file.lexically_normal().string());
      continue;
    }
    std::vector<std::string> symbols;
    const std::string label = m[1].str();
    for (auto s = std::sregex_iterator(label.begin(), label.end(), code_span); s != std::sregex_iterator(); ++s)
      symbols.push_back(symbol_of((*s)[1].str()));
    if (m[4].matched) symbols.push_back(symbol_of(m[4].str()));
    if (fs::is_directory(file)) continue;
    const std::string source = read_file(file);
    for (const std::string& symbol : symbols)
      if (!symbol.empty() && !contains_word(source, symbol))
        problems.push_back(where + ": " + target + " has no '" + symbol + "'");
  }
  return problems;
}

std::vector<fs::path> guides() {
  std::vector<fs::path> out{kRoot / "README.md"};
  for (const auto& entry : fs::directory_iterator(kRoot / "docs"))
    if (entry.path().extension() == ".md") out.push_back(entry.path());
  return out;
}

}  // namespace

TEST_CASE("every code link in README.md and docs/*.md names an existing file and symbol", "[docs]") {
  const std::regex code_link(R"(\]\(\.\./)");
  long links_checked = 0;
  for (const fs::path& doc : guides()) {
    const std::string text = read_file(doc);
    links_checked += std::distance(std::sregex_iterator(text.begin(), text.end(), code_link), std::sregex_iterator());
    for (const std::string& problem : link_problems(doc, text)) FAIL_CHECK(problem);
  }
  CHECK(links_checked > 20);  // the guides do link code; a parser that finds none proves nothing
}

TEST_CASE("the docs link check catches a missing file, a missing symbol and a line anchor", "[docs]") {
  const fs::path doc = kRoot / "docs" / "example.md";
  CHECK(link_problems(doc, "[`Linear::forward`](../layers/linear.cpp) and [x](../layers/linear.cpp) `linear`").empty());
  const std::vector<std::string> missing_file = link_problems(doc, "see [`conv2d`](../autograd/ops/no_such_file.cpp)");
  REQUIRE(missing_file.size() == 1);
  CHECK(missing_file[0].find("no file") != std::string::npos);
  const std::vector<std::string> missing_symbol = link_problems(doc, "[`no_such_symbol_xyz`](../layers/linear.cpp)");
  REQUIRE(missing_symbol.size() == 1);
  CHECK(missing_symbol[0].find("has no 'no_such_symbol_xyz'") != std::string::npos);
  CHECK(link_problems(doc, "[linear.cpp](../layers/linear.cpp) `forwardx`").size() == 1);  // the adjacent span
  CHECK(link_problems(doc, "[`Linear::forwar`](../layers/linear.cpp)").size() == 1);      // whole words only
  const std::vector<std::string> anchor = link_problems(doc, "[#L15](../layers/linear.cpp#L15)");
  REQUIRE(anchor.size() == 1);
  CHECK(anchor[0].find("line anchor") != std::string::npos);
}
