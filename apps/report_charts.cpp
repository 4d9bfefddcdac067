// The SVG charts of the HTML reports (declared in report_html.h): line charts and stacked bars.
//
// Every chart is drawn in a fixed coordinate system (the viewBox) and scaled by the browser to
// the width of its box. Text is laid out from an estimate of its width (kCharWidth per
// character), generous enough that labels stay inside the picture; the legend is HTML below
// the picture, so the browser wraps long series names instead of clipping them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "apps/report_html.h"

namespace nnlab {

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr double kWidth = 600, kHeight = 300, kTop = 14, kBottom = 44;
constexpr double kFont = 11, kCharWidth = 6.6;  // 11 px sans-serif: most characters are narrower than 6.6 px

const char* color_of(size_t i) { return kColors[i % (sizeof kColors / sizeof kColors[0])]; }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A tick label: short, and free of float noise (0.30000000000000004 prints as 0.3).
std::string tick_label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  std::snprintf(buf, sizeof buf, (a != 0 && (a >= 1e6 || a < 1e-3)) ? "%.2g" : "%.6g", v);
  return buf;
}

double text_width(const std::string& s) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;  // UTF-8: count characters, not bytes
  return kCharWidth * double(chars);
}

// The first `keep` characters (not bytes: UTF-8) and "…".
std::string shorten(const std::string& s, size_t keep) {
  size_t cut = 0, chars = 0;
  for (; cut < s.size(); ++cut)
    if ((static_cast<unsigned char>(s[cut]) & 0xC0) != 0x80 && chars++ == keep) break;
  return s.substr(0, cut) + "…";
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle", const char* extra = "") {
  return "<text x='" + num(x) + "' y='" + num(y) + "' text-anchor='" + anchor + "'" + extra + ">" + html_escape(s) +
         "</text>";
}

// The largest 1, 2 or 5 × 10^k not above `raw`: the tick step people read most easily.
double nice_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f >= 5 ? 5 : f >= 2 ? 2 : 1) * p;
}

// Maps data values to pixels along one axis. The domain is widened to whole ticks (as d3's
// scale.nice()), so the first and last gridlines sit on the frame.
struct Scale {
  double lo = 0, hi = 1, p0 = 0, p1 = 1;
  bool log = false;
  std::vector<double> ticks;

  double operator()(double v) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi, x = log ? std::log10(v) : v;
    return p0 + (x - a) / (b - a) * (p1 - p0);
  }
};

Scale linear_scale(double lo, double hi, bool integer) {
  if (hi <= lo) {  // one value: a band with it in the middle
    const double half = integer || lo == 0 ? 1 : std::fabs(lo) * 0.05;
    lo -= half, hi += half;
  }
  if (lo > 0 && lo < hi / 3) lo = 0;  // start near-zero data at zero
  double step = nice_step((hi - lo) / 5);
  if (integer) step = std::max(step, 1.0);
  // At most 7 intervals: the next 1-2-5 step up while there are more (0.02 -> 0.05 -> 0.1).
  while ((std::ceil(hi / step) - std::floor(lo / step)) > 7) step = nice_step(step * 2.5 * 1.0001);
  Scale s;
  s.lo = std::floor(lo / step) * step;
  s.hi = std::ceil(hi / step) * step;
  for (double t = s.lo; t <= s.hi + step * 1e-6; t += step) s.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return s;
}

// Logarithmic: the domain runs between 1-2-5 multiples; ticks at every 1-2-5 multiple when
// the data spans up to three decades, else at the powers of ten.
Scale log_scale(double lo, double hi) {
  const double m[] = {1, 2, 5};
  const double decade_lo = std::pow(10.0, std::floor(std::log10(lo)));
  const double decade_hi = std::pow(10.0, std::floor(std::log10(hi)));
  Scale s;
  s.log = true;
  s.lo = decade_lo;  // the largest multiple not above lo
  for (double f : m)
    if (decade_lo * f <= lo * (1 + 1e-9)) s.lo = decade_lo * f;
  s.hi = decade_hi * 10;  // the smallest multiple not below hi
  for (int i = 2; i >= 0; --i)
    if (decade_hi * m[i] >= hi * (1 - 1e-9)) s.hi = decade_hi * m[i];
  if (s.hi <= s.lo) s.hi = s.lo * 10;
  const bool dense = std::log10(s.hi / s.lo) <= 3.01;
  for (double d = decade_lo; d <= s.hi * (1 + 1e-9); d *= 10)
    for (double f : m)
      if ((dense || f == 1) && d * f >= s.lo * (1 - 1e-9) && d * f <= s.hi * (1 + 1e-9)) s.ticks.push_back(d * f);
  return s;
}

Scale make_scale(const std::vector<double>& values, bool log, bool integer) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v) && (!log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi)) lo = log ? 1 : 0, hi = log ? 10 : 1;  // nothing to draw: an empty frame
  return log ? log_scale(lo, hi) : linear_scale(lo, hi, integer);
}

bool drawable(const ChartAxes& axes, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && (!axes.log_x || x > 0) && (!axes.log_y || y > 0);
}

std::string html_legend(const std::vector<std::string>& names) {
  std::string out = "<div class='legend'>";
  for (size_t i = 0; i < names.size(); ++i)
    out += std::string("<span><i style='background:") + color_of(i) + "'></i>" + html_escape(names[i]) + "</span>";
  return out + "</div>";
}

std::string figure(const std::string& title, const std::string& svg, const std::vector<std::string>& legend) {
  return "<figure class='chart'><figcaption>" + html_escape(title) + "</figcaption><div class='plot'>" + svg +
         "<div class='tip'></div></div>" + html_legend(legend) + "</figure>\n";
}

std::string svg_open(double height) {
  return "<svg viewBox='0 0 " + num(kWidth) + " " + num(height) + "' font-size='" + num(kFont) +
         "' font-family='sans-serif' role='img'>";
}

}  // namespace

namespace {

std::string svg_line(double x1, double y1, double x2, double y2, const std::string& extra = "") {
  return "<line x1='" + num(x1) + "' y1='" + num(y1) + "' x2='" + num(x2) + "' y2='" + num(y2) + "'" + extra + "/>";
}

// Gridlines, the frame's left and bottom edges, ticks, axis labels, and the marked x values.
void draw_frame(std::ostringstream& o, const ChartAxes& axes, const Scale& sx, const Scale& sy) {
  o << "<g stroke='#e6e6e6'>";
  for (double t : sx.ticks) o << svg_line(sx(t), sy.p1, sx(t), sy.p0);
  for (double t : sy.ticks) o << svg_line(sx.p0, sy(t), sx.p1, sy(t));
  o << "</g><path d='M" << num(sx.p0) << ' ' << num(sy.p1) << "V" << num(sy.p0) << "H" << num(sx.p1)
    << "' fill='none' stroke='#777'/>";
  for (double t : sx.ticks) o << text(sx(t), sy.p0 + 15, tick_label(t));
  for (double t : sy.ticks) o << text(sx.p0 - 6, sy(t) + 4, tick_label(t), "end");
  o << text((sx.p0 + sx.p1) / 2, kHeight - 8, axes.x_label);
  const double mid_y = (sy.p0 + sy.p1) / 2;
  o << text(12, mid_y, axes.y_label, "middle", (" transform='rotate(-90 12 " + num(mid_y) + ")'").c_str());
  for (double m : axes.marks_x) {
    if (!drawable(axes, m, sy.log ? sy.lo : 0) || m < sx.lo || m > sx.hi) continue;
    const std::string label = "crossover " + tick_label(m);
    const bool fits_right = sx(m) + 4 + text_width(label) <= sx.p1;  // else the label goes left of the line
    o << svg_line(sx(m), sy.p1, sx(m), sy.p0, " stroke='#444' stroke-dasharray='4 3'")
      << text(fits_right ? sx(m) + 4 : sx(m) - 4, sy.p1 + 12, label, fits_right ? "start" : "end");
  }
}

// Series i of `count`: its line, and markers when there are few points. data-values holds the
// data behind each point, in the order of `points`, for the hover read-out.
void draw_series(std::ostringstream& o, const ChartAxes& axes, const Scale& sx, const Scale& sy, const ChartSeries& s,
                 size_t i, size_t count) {
  std::string points, values, markers;
  size_t n = 0;
  for (size_t j = 0; j < s.x.size() && j < s.y.size(); ++j) {
    if (!drawable(axes, s.x[j], s.y[j])) continue;
    char value[64];
    std::snprintf(value, sizeof value, "%.6g,%.6g ", s.x[j], s.y[j]);
    points += num(sx(s.x[j])) + "," + num(sy(s.y[j])) + " ";
    values += value;
    markers += "<circle cx='" + num(sx(s.x[j])) + "' cy='" + num(sy(s.y[j])) + "' r='2.5'/>";
    ++n;
  }
  // Earlier lines are drawn wider, so that a line hidden under an identical later one (a
  // bit-identical run) still shows its colour along both edges.
  const double width = count > 1 ? std::max(1.5, 3.5 - double(i)) : 1.6;
  o << "<polyline class='series' fill='none' stroke='" << color_of(i) << "' stroke-width='" << num(width)
    << "' data-name='" << html_escape(s.name) << "' data-values='" << values << "' points='" << points << "'/>";
  if (n <= 60) o << "<g fill='" << color_of(i) << "'>" << markers << "</g>";
}

}  // namespace

std::string svg_line_chart(const ChartAxes& axes, const std::vector<ChartSeries>& series) {
  std::vector<double> xs, ys;
  for (const ChartSeries& s : series)
    for (size_t j = 0; j < s.x.size() && j < s.y.size(); ++j)
      if (drawable(axes, s.x[j], s.y[j])) xs.push_back(s.x[j]), ys.push_back(s.y[j]);
  Scale sy = make_scale(ys, axes.log_y, false);
  Scale sx = make_scale(xs, axes.log_x, axes.integer_x);
  // Room on the left for the widest y tick label and the rotated y label; on the right for
  // half of the last x tick label, which is centred on the frame's edge.
  double widest = 0;
  for (double t : sy.ticks) widest = std::max(widest, text_width(tick_label(t)));
  sx.p0 = std::max(48.0, widest + 30);
  sx.p1 = kWidth - std::max(14.0, text_width(tick_label(sx.hi)) / 2 + 6);
  sy.p0 = kHeight - kBottom;
  sy.p1 = kTop;

  std::ostringstream o;
  o << svg_open(kHeight);
  draw_frame(o, axes, sx, sy);
  std::vector<std::string> names;
  for (size_t i = 0; i < series.size(); ++i) {
    draw_series(o, axes, sx, sy, series[i], i, series.size());
    names.push_back(series[i].name);
  }
  o << svg_line(sx.p0, sy.p1, sx.p0, sy.p0, " class='guide' stroke='#999' visibility='hidden'") << "</svg>";
  return figure(axes.title, o.str(), names);
}

std::string svg_stacked_bars(const std::string& title, const std::string& unit, const std::vector<std::string>& parts,
                             const std::vector<BarGroup>& groups) {
  double max_total = 0, widest = 0;
  for (const BarGroup& g : groups) {
    double t = 0;
    for (double v : g.parts) t += v;
    max_total = std::max(max_total, t);
    widest = std::max(widest, text_width(g.label));
  }
  // The bar labels take what they need, up to a third of the width; longer ones are shortened
  // with "…" and carry their full text as a tooltip.
  const double max_label = kWidth / 3, left = std::min(widest, max_label) + 12, right = 76;
  const double bar = 22, pitch = 32, axis = 36, height = 8 + pitch * double(groups.size()) + axis;
  Scale sx = linear_scale(0, max_total > 0 ? max_total : 1, false);
  sx.p0 = left, sx.p1 = kWidth - right;
  const double bottom_y = height - axis + 4;

  std::ostringstream o;
  o << svg_open(height) << "<g stroke='#e6e6e6'>";
  for (double t : sx.ticks) o << svg_line(sx(t), 4, sx(t), bottom_y);
  o << "</g>";
  for (double t : sx.ticks) o << text(sx(t), bottom_y + 14, tick_label(t));
  o << text((left + sx.p1) / 2, height - 4, unit == "s" ? "seconds" : unit);
  for (size_t i = 0; i < groups.size(); ++i) {
    const double y = 8 + pitch * double(i);
    std::string label = groups[i].label;
    if (text_width(label) > max_label) label = shorten(label, size_t(max_label / kCharWidth) - 1);
    o << "<g><title>" << html_escape(groups[i].label) << "</title>" << text(left - 6, y + bar * 0.7, label, "end")
      << "</g>";
    double x = left, total = 0;
    for (size_t j = 0; j < groups[i].parts.size(); ++j) {
      const double w = std::max(0.0, sx(total + groups[i].parts[j]) - sx(total));
      o << "<rect x='" << num(x) << "' y='" << y << "' width='" << num(w) << "' height='" << bar << "' fill='"
        << color_of(j) << "'><title>" << html_escape(j < parts.size() ? parts[j] : "") << ": "
        << num(groups[i].parts[j]) << ' ' << html_escape(unit) << "</title></rect>";
      x += w;
      total += groups[i].parts[j];
    }
    o << text(x + 4, y + bar * 0.7, num(total) + " " + unit, "start");
  }
  o << "</svg>";
  return figure(title, o.str(), parts);
}

}  // namespace nnlab
