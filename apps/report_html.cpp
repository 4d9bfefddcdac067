#include "apps/report_html.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace nnlab {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '\'') out += "&#39;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       bool text_columns) {
  std::string out = text_columns ? "<div class='table-wrap'><table class='text'><tr>" : "<div class='table-wrap'><table><tr>";
  for (const std::string& h : header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& c : row) out += "<td>" + html_escape(c) + "</td>";
    out += "</tr>";
  }
  return out + "</table></div>\n";
}

namespace {

// Tables keep numbers on one line and wrap their headers; a table wider than the page
// scrolls in its .table-wrap box. Charts fill the width of their grid cell.
const char* kStyle =
    "body{font-family:sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}"
    "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,480px),1fr));gap:.5em 2.5em}"
    ".columns{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,440px),1fr));gap:0 2.5em}"
    "figure.chart{margin:1em 0;max-width:760px;min-width:0}"
    "figcaption{font-weight:bold;font-size:.95em;margin-bottom:.3em}"
    ".plot{position:relative}.plot svg{width:100%;height:auto;display:block}"
    ".legend{display:flex;flex-wrap:wrap;gap:.2em 1.2em;font-size:.85em;margin-top:.3em}"
    ".legend span{display:inline-flex;align-items:center;overflow-wrap:anywhere}"
    ".legend i{width:.9em;height:.9em;margin-right:.35em;flex:none}"
    ".tip{position:absolute;display:none;pointer-events:none;background:rgba(255,255,255,.95);border:1px solid #bbb;"
    "padding:4px 7px;font-size:12px;white-space:nowrap;box-shadow:0 1px 4px rgba(0,0,0,.2)}"
    ".table-wrap{overflow-x:auto;max-width:100%;margin:1em 0}"
    "table{border-collapse:collapse;font-size:.9em}"
    "td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}"
    "th{background:#f3f3f3;white-space:normal;vertical-align:bottom}"
    "td:first-child,th:first-child{text-align:left}"
    "table.text td,table.text th{white-space:pre-wrap;text-align:left;overflow-wrap:anywhere;max-width:32em;"
    "vertical-align:top}table.text td:first-child{white-space:nowrap}"
    "pre{background:#f7f7f7;padding:8px;overflow-x:auto}";

// Hover read-out: the value of every series at the point nearest the pointer, and a guide
// line there. Each polyline carries its data in data-values, in the order of its points.
const char* kScript = R"JS(
document.querySelectorAll('figure.chart').forEach(function (fig) {
  var svg = fig.querySelector('svg'), tip = fig.querySelector('.tip'), guide = svg.querySelector('.guide');
  var lines = svg.querySelectorAll('polyline.series');
  if (!guide || !tip || lines.length === 0) return;
  svg.addEventListener('mousemove', function (ev) {
    var at = svg.createSVGPoint();
    at.x = ev.clientX; at.y = ev.clientY;
    at = at.matrixTransform(svg.getScreenCTM().inverse());
    tip.textContent = '';
    var guideX = null;
    lines.forEach(function (line) {
      var values = line.getAttribute('data-values').trim().split(' '), best = -1, distance = Infinity;
      for (var i = 0; i < line.points.numberOfItems; ++i) {
        var d = Math.abs(line.points.getItem(i).x - at.x);
        if (d < distance) { distance = d; best = i; }
      }
      if (best < 0) return;
      if (guideX === null) guideX = line.points.getItem(best).x;
      var xy = values[best].split(','), row = document.createElement('div'), dot = document.createElement('b');
      dot.style.color = line.getAttribute('stroke');
      dot.textContent = '● ';
      row.appendChild(dot);
      row.appendChild(document.createTextNode(line.getAttribute('data-name') + ': ' + xy[1] + '  (x = ' + xy[0] + ')'));
      tip.appendChild(row);
    });
    if (guideX === null) return;
    guide.setAttribute('x1', guideX); guide.setAttribute('x2', guideX);
    guide.setAttribute('visibility', 'visible');
    var box = fig.querySelector('.plot').getBoundingClientRect();
    tip.style.display = 'block';
    var x = ev.clientX - box.left + 14;
    if (x + tip.offsetWidth > box.width) x = Math.max(0, ev.clientX - box.left - 14 - tip.offsetWidth);
    tip.style.left = x + 'px';
    tip.style.top = Math.max(0, ev.clientY - box.top - tip.offsetHeight - 8) + 'px';
  });
  svg.addEventListener('mouseleave', function () {
    tip.style.display = 'none';
    guide.setAttribute('visibility', 'hidden');
  });
});
)JS";

}  // namespace

std::string html_page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
         "<meta name='viewport' content='width=device-width, initial-scale=1'><title>" +
         html_escape(title) + "</title>\n<style>" + kStyle + "</style></head>\n<body>\n<h1>" + html_escape(title) +
         "</h1>\n" + body + "\n<script>" + kScript + "</script>\n</body></html>\n";
}

void check_writable(const std::string& path, const char* option) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  NNLAB_CHECK(!path.empty() && !fs::is_directory(p, ec), option, " '", path, "' must name a file");
  NNLAB_CHECK(fs::is_directory(dir, ec), option, " '", path, "': the folder ", dir.string(),
              " does not exist; create it or choose another path");
  const bool ok = fs::exists(p, ec) ? ::access(path.c_str(), W_OK) == 0 : ::access(dir.c_str(), W_OK) == 0;
  NNLAB_CHECK(ok, option, " '", path, "' cannot be written (permission denied); choose a writable path");
}

void write_text_file(const std::string& path, const std::string& content) {
  // A fresh name beside `path` (same file system, so the rename is atomic), never a file the
  // user already has.
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  NNLAB_CHECK(fd >= 0, "cannot write '", path, "': ", std::strerror(errno), "; choose a writable path");
  ::fchmod(fd, 0644);  // mkstemp makes it private (0600); a report is meant to be shared
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const int write_errno = errno;
  const bool written = done == content.size() && ::close(fd) == 0;
  if (!written) {
    std::remove(tmp.c_str());
    fail("writing '", path, "' failed: ", std::strerror(write_errno), " (disk full?); nothing was written");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("cannot replace '", path, "': ", ec.message(), "; nothing was written");
  }
}

}  // namespace nnlab
