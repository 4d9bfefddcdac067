// Self-contained HTML reports: one file with inline CSS and inline SVG charts, no scripts,
// no external files or fonts, so a report opens offline and can be mailed or committed.
#pragma once
#include <string>
#include <vector>

namespace nnlab {

std::string html_escape(const std::string& text);

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;
};

struct ChartAxes {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<double> marks_x;  // vertical dashed lines (e.g. a crossover batch size)
};

// A line chart, one polyline with point markers per series, with axes, ticks and a legend.
std::string svg_line_chart(const ChartAxes& axes, const std::vector<ChartSeries>& series);

// Horizontal stacked bars: one bar per group, one segment per part (e.g. the phases of an
// epoch: data, forward, backward, optimizer), with the parts' legend and each bar's total.
struct BarGroup {
  std::string label;
  std::vector<double> parts;
};
std::string svg_stacked_bars(const std::string& title, const std::string& unit, const std::vector<std::string>& parts,
                             const std::vector<BarGroup>& groups);

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// The whole page: title, inline style, body.
std::string html_page(const std::string& title, const std::string& body);

// Throws an Error when `path` could not be written (missing folder, no permission), without
// creating or changing anything: commands call it before any work.
void check_writable(const std::string& path, const char* option);

// Writes `content` to path through a temporary file and a rename.
void write_text_file(const std::string& path, const std::string& content);

}  // namespace nnlab
