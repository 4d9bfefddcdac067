#include "apps/report_html.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace nnlab {

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr double kW = 640, kH = 320, kLeft = 70, kRight = 170, kTop = 30, kBottom = 45;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// Maps data values to pixels along one axis (optionally logarithmic).
struct Scale {
  double lo, hi, p0, p1;
  bool log;
  double operator()(double v) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi, x = log ? std::log10(v) : v;
    return b > a ? p0 + (x - a) / (b - a) * (p1 - p0) : (p0 + p1) / 2;
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      for (double d = std::pow(10, std::floor(std::log10(lo))); d <= hi * 1.0001; d *= 10)
        if (d >= lo * 0.9999) t.push_back(d);
      if (t.size() < 2) t = {lo, hi};
    } else {
      for (int i = 0; i <= 4; ++i) t.push_back(lo + (hi - lo) * i / 4);
    }
    return t;
  }
};

Scale make_scale(std::vector<double> values, bool log, double p0, double p1) {
  if (log) values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0); }), values.end());
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  double lo = values.empty() ? (log ? 1 : 0) : *std::min_element(values.begin(), values.end());
  double hi = values.empty() ? lo + 1 : *std::max_element(values.begin(), values.end());
  if (hi <= lo) hi = log ? lo * 10 : lo + 1;
  if (!log && lo > 0 && lo < hi / 3) lo = 0;  // start near-zero data at zero
  return {lo, hi, p0, p1, log};
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle", int size = 11) {
  return "<text x='" + num(x) + "' y='" + num(y) + "' font-size='" + std::to_string(size) + "' text-anchor='" +
         anchor + "'>" + html_escape(s) + "</text>";
}

}  // namespace

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

std::string svg_line_chart(const ChartAxes& axes, const std::vector<ChartSeries>& series) {
  std::vector<double> xs, ys;
  for (const ChartSeries& s : series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  const Scale sx = make_scale(xs, axes.log_x, kLeft, kW - kRight), sy = make_scale(ys, axes.log_y, kH - kBottom, kTop);
  std::ostringstream o;
  o << "<svg width='" << kW << "' height='" << kH << "' viewBox='0 0 " << kW << ' '
    << kH << "' font-family='sans-serif'>" << text(kW / 2 - kRight / 2 + kLeft / 2, 18, axes.title, "middle", 13);
  o << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << kW - kLeft - kRight << "' height='"
    << kH - kTop - kBottom << "' fill='none' stroke='#999'/>";
  for (double t : sx.ticks()) o << text(sx(t), kH - kBottom + 15, num(t));
  for (double t : sy.ticks()) o << text(kLeft - 5, sy(t) + 4, num(t), "end");
  o << text((kLeft + kW - kRight) / 2, kH - 8, axes.x_label);
  o << "<text x='14' y='" << (kTop + kH - kBottom) / 2 << "' font-size='11' text-anchor='middle' transform='rotate(-90 14 "
    << (kTop + kH - kBottom) / 2 << ")'>" << html_escape(axes.y_label) << "</text>";
  for (double m : axes.marks_x)
    o << "<line x1='" << num(sx(m)) << "' x2='" << num(sx(m)) << "' y1='" << kTop << "' y2='" << kH - kBottom
      << "' stroke='#444' stroke-dasharray='4 3'/>" << text(sx(m), kTop + 12, "crossover " + num(m));
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& s = series[i];
    const char* color = kColors[i % 8];
    std::string points;
    for (size_t j = 0; j < s.x.size() && j < s.y.size(); ++j) {
      if ((axes.log_x && !(s.x[j] > 0)) || (axes.log_y && !(s.y[j] > 0)) || !std::isfinite(s.y[j])) continue;
      points += num(sx(s.x[j])) + "," + num(sy(s.y[j])) + " ";
      if (s.x.size() <= 40) o << "<circle cx='" << num(sx(s.x[j])) << "' cy='" << num(sy(s.y[j])) << "' r='2.5' fill='" << color << "'/>";
    }
    o << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5' points='" << points << "'/>";
    const double ly = kTop + 10 + 16 * double(i);
    o << "<rect x='" << kW - kRight + 12 << "' y='" << ly - 8 << "' width='10' height='10' fill='" << color << "'/>"
      << text(kW - kRight + 27, ly + 1, s.name, "start");
  }
  o << "</svg>";
  return o.str();
}

std::string svg_stacked_bars(const std::string& title, const std::string& unit, const std::vector<std::string>& parts,
                             const std::vector<BarGroup>& groups) {
  double max_total = 0;
  for (const BarGroup& g : groups) {
    double t = 0;
    for (double v : g.parts) t += v;
    max_total = std::max(max_total, t);
  }
  const double bar = 26, height = kTop + 30 + bar * 1.5 * double(groups.size()), left = 140, width = kW - left - kRight;
  std::ostringstream o;
  o << "<svg width='" << kW << "' height='" << height << "' viewBox='0 0 " << kW
    << ' ' << height << "' font-family='sans-serif'>" << text(kW / 2, 18, title, "middle", 13);
  for (size_t i = 0; i < groups.size(); ++i) {
    const double y = kTop + bar * 1.5 * double(i);
    double x = left, total = 0;
    o << text(left - 6, y + bar * 0.65, groups[i].label, "end");
    for (size_t j = 0; j < groups[i].parts.size(); ++j) {
      const double w = max_total > 0 ? groups[i].parts[j] / max_total * width : 0;
      o << "<rect x='" << num(x) << "' y='" << y << "' width='" << num(w) << "' height='" << bar << "' fill='"
        << kColors[j % 8] << "'><title>" << html_escape(j < parts.size() ? parts[j] : "") << ": "
        << num(groups[i].parts[j]) << ' ' << html_escape(unit) << "</title></rect>";
      x += w;
      total += groups[i].parts[j];
    }
    o << text(x + 4, y + bar * 0.65, num(total) + " " + unit, "start");
  }
  for (size_t j = 0; j < parts.size(); ++j) {
    const double ly = kTop + 10 + 16 * double(j);
    o << "<rect x='" << kW - kRight + 40 << "' y='" << ly - 8 << "' width='10' height='10' fill='" << kColors[j % 8]
      << "'/>" << text(kW - kRight + 55, ly + 1, parts[j], "start");
  }
  o << "</svg>";
  return o.str();
}

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table><tr>";
  for (const std::string& h : header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& c : row) out += "<td>" + html_escape(c) + "</td>";
    out += "</tr>";
  }
  return out + "</table>";
}

std::string html_page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>" + html_escape(title) +
         "</title>\n<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
         "th{background:#f3f3f3}pre{background:#f7f7f7;padding:8px;overflow-x:auto}</style></head>\n<body>\n<h1>" +
         html_escape(title) + "</h1>\n" + body + "\n</body></html>\n";
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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    NNLAB_CHECK(out.good(), "cannot write '", tmp, "'");
    out << content;
    out.flush();
    NNLAB_CHECK(out.good(), "writing '", tmp, "' failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  NNLAB_CHECK(!ec, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

}  // namespace nnlab
