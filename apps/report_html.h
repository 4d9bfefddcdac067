// Self-contained HTML reports: one file with inline CSS, inline SVG charts and one small inline
// script (hover read-outs only; the charts are complete without it), no external files, fonts
// or network fetches, so a report opens offline and can be mailed or committed.
//
// The page is responsive: charts scale to the width they are given, legends are HTML that
// wraps instead of being clipped, and a wide table scrolls inside its own box rather than
// pushing the page wider than the window.
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
  bool integer_x = false;       // x counts something (epochs): ticks only at whole numbers
};

// A line chart in the manner of TensorBoard's scalar view: one line per series (markers when
// there are few points), gridlines, ticked and labelled axes, a legend that wraps, and a
// hover read-out of every series at the nearest x.
std::string svg_line_chart(const ChartAxes& axes, const std::vector<ChartSeries>& series);

// Horizontal stacked bars: one bar per group, one segment per part (e.g. the phases of an
// epoch: data, forward, backward, optimizer), with the parts' legend and each bar's total.
struct BarGroup {
  std::string label;
  std::vector<double> parts;
};
std::string svg_stacked_bars(const std::string& title, const std::string& unit, const std::vector<std::string>& parts,
                             const std::vector<BarGroup>& groups);

// A table in a box of its own that scrolls sideways when the window is too narrow for it.
// The first column is the row's name (left-aligned); the others are right-aligned numbers
// unless `text_columns` is set, which left-aligns and wraps every column (configuration values).
std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       bool text_columns = false);

// The whole page: title, inline style, body, the hover script.
std::string html_page(const std::string& title, const std::string& body);

// Throws an Error when `path` could not be written (missing folder, no permission), without
// creating or changing anything: commands call it before any work.
void check_writable(const std::string& path, const char* option);

// Writes `content` to path through a temporary file beside it and a rename, so `path` is
// either the old file or the whole new one; on failure the temporary file is removed.
void write_text_file(const std::string& path, const std::string& content);

}  // namespace nnlab
