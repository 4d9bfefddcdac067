#include "apps/compare_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "apps/report_html.h"
#include "core/error.h"

namespace nnlab {

namespace {

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string sci(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

// Characters, not bytes: "×" and "Δ" take two bytes but one column.
size_t columns(const std::string& text) {
  size_t n = 0;
  for (unsigned char ch : text) n += (ch & 0xC0) != 0x80;
  return n;
}
std::string pad_column(const std::string& text, size_t width) {
  return text + std::string(width > columns(text) ? width - columns(text) : 0, ' ') + "  ";
}

double max_weight_drift(const Drift& d) {
  double m = 0;
  for (const auto& [name, v] : d.weight_rel_l2) m = std::max(m, v);
  return m;
}

// The side-by-side rows shared by the terminal table and the HTML table.
std::vector<std::vector<std::string>> summary_rows(const CompareResult& r) {
  std::vector<std::vector<std::string>> rows;
  const double base = r.runs[0].images_per_second;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const VariantRun& v = r.runs[i];
    const Drift* d = i > 0 ? &r.drift[i - 1] : nullptr;
    rows.push_back({v.label, v.device, std::to_string(v.threads), v.conv, std::to_string(v.step_loss.size()),
                    fixed(v.phases.data, 3), fixed(v.phases.forward, 3), fixed(v.phases.backward, 3),
                    fixed(v.phases.optimizer, 3), fixed(v.seconds, 3), fixed(v.images_per_second, 0),
                    fixed(v.images_per_second / base, 2) + "×", fixed(100.0 * v.test_accuracy, 2) + "%",
                    d ? sci(d->max_loss_diff) : "baseline", d ? sci(max_weight_drift(*d)) : "baseline"});
  }
  return rows;
}

const std::vector<std::string> kHeader = {"variant", "device", "threads", "conv", "steps", "data s", "forward s",
                                          "backward s", "optimizer s", "total s", "img/s", "speed-up", "test acc",
                                          "max |Δloss|", "max weight rel L2"};

// The HTML page splits the terminal's one wide table in two, speed and agreement, so each
// fits the width of a page; both start with the variant.
std::string html_tables(const std::vector<std::vector<std::string>>& rows) {
  constexpr size_t kFirstAgreementColumn = 12;  // "test acc"
  std::vector<std::string> speed_header(kHeader.begin(), kHeader.begin() + kFirstAgreementColumn);
  std::vector<std::string> agreement_header = {kHeader[0]};
  agreement_header.insert(agreement_header.end(), kHeader.begin() + kFirstAgreementColumn, kHeader.end());
  std::vector<std::vector<std::string>> speed, agreement;
  for (const auto& row : rows) {
    speed.emplace_back(row.begin(), row.begin() + kFirstAgreementColumn);
    agreement.push_back({row[0]});
    agreement.back().insert(agreement.back().end(), row.begin() + kFirstAgreementColumn, row.end());
  }
  return "<h2>Speed</h2>\n" + html_table(speed_header, speed) + "<h2>Agreement with the baseline</h2>\n" +
         html_table(agreement_header, agreement);
}

}  // namespace

void print_compare(const CompareResult& r) {
  const auto rows = summary_rows(r);
  std::vector<size_t> width(kHeader.size());
  for (size_t j = 0; j < kHeader.size(); ++j) {
    width[j] = columns(kHeader[j]);
    for (const auto& row : rows) width[j] = std::max(width[j], columns(row[j]));
  }
  std::printf("\nnnlab compare: %s on %s, batch %lld, seed %llu\n", r.config.model.c_str(), r.config.data.c_str(),
              static_cast<long long>(r.config.batch), static_cast<unsigned long long>(r.config.seed));
  for (size_t j = 0; j < kHeader.size(); ++j) std::printf("%s", pad_column(kHeader[j], width[j]).c_str());
  std::printf("\n");
  for (const auto& row : rows) {
    for (size_t j = 0; j < row.size(); ++j) std::printf("%s", pad_column(row[j], width[j]).c_str());
    std::printf("\n");
  }
  for (size_t i = 0; i < r.drift.size(); ++i) {
    const Drift& d = r.drift[i];
    const std::string where =
        d.max_loss_step > 0 ? "at step " + std::to_string(d.max_loss_step) : "(identical losses at every step)";
    std::printf("\ndrift of %s from %s: largest |Δloss| %.3e %s; final weights (relative L2):\n",
                r.runs[i + 1].label.c_str(), r.runs[0].label.c_str(), d.max_loss_diff, where.c_str());
    for (const auto& [name, v] : d.weight_rel_l2) std::printf("  %-24s %.3e\n", name.c_str(), v);
  }
}

void write_compare_records(const CompareResult& r, const nlohmann::json& environment, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  NNLAB_CHECK(out.good(), "--metrics: cannot write '", path, "'");
  out << nlohmann::json{{"type", "compare"}, {"model", r.config.model}, {"data", r.config.data},
                        {"batch", r.config.batch}, {"seed", r.config.seed}, {"environment", environment}}
             .dump()
      << "\n";
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const VariantRun& v = r.runs[i];
    nlohmann::json j{{"type", "variant"},
                     {"variant", v.label},
                     {"device", v.device},
                     {"threads", v.threads},
                     {"conv_impl", v.conv},
                     {"gemm_impl", v.gemm},
                     {"reduce_impl", v.reduce},
                     {"math", v.math},
                     {"precision", v.precision},
                     {"steps", v.step_loss.size()},
                     {"seconds", v.seconds},
                     {"images_per_second", v.images_per_second},
                     {"speed_up", v.images_per_second / r.runs[0].images_per_second},
                     {"test_accuracy", v.test_accuracy},
                     {"phase_seconds",
                      {{"data", v.phases.data},
                       {"forward", v.phases.forward},
                       {"backward", v.phases.backward},
                       {"optimizer", v.phases.optimizer}}},
                     {"step_loss", v.step_loss}};
    if (i > 0) {
      const Drift& d = r.drift[i - 1];
      nlohmann::json weights;
      for (const auto& [name, val] : d.weight_rel_l2) weights[name] = val;
      j["drift"] = {{"against", r.runs[0].label},
                    {"max_loss_diff", d.max_loss_diff},
                    {"max_loss_diff_step", d.max_loss_step},
                    {"loss_diff", d.loss_diff},
                    {"weight_relative_l2", weights}};
    }
    out << j.dump() << "\n";
  }
  NNLAB_CHECK(out.good(), "--metrics: writing '", path, "' failed");
}

std::string compare_report_html(const CompareResult& r) {
  std::string body = "<p>Model <b>" + html_escape(r.config.model) + "</b> on " + html_escape(r.config.data) +
                     ", batch " + std::to_string(r.config.batch) + ", seed " + std::to_string(r.config.seed) +
                     ": the identical training (same initial weights, batches and dropout masks) on each variant; " +
                     "the first is the baseline.</p>\n" + html_tables(summary_rows(r));
  std::vector<ChartSeries> losses;
  std::vector<BarGroup> phases;
  for (const VariantRun& v : r.runs) {
    ChartSeries s{v.label, {}, v.step_loss};
    for (size_t i = 0; i < v.step_loss.size(); ++i) s.x.push_back(double(i + 1));
    losses.push_back(std::move(s));
    phases.push_back({v.label, {v.phases.data, v.phases.forward, v.phases.backward, v.phases.optimizer}});
  }
  ChartAxes loss_axes{"training loss per step", "step", "loss"};
  loss_axes.integer_x = true;
  body += "<h2>Loss per step</h2>\n" + svg_line_chart(loss_axes, losses);
  body += "<h2>Time per phase</h2>\n" +
          svg_stacked_bars("seconds per phase, whole run", "s", {"data", "forward", "backward", "optimizer"}, phases);
  for (size_t i = 0; i < r.drift.size(); ++i) {
    const Drift& d = r.drift[i];
    ChartSeries s{r.runs[i + 1].label + " vs " + r.runs[0].label, {}, d.loss_diff};
    for (size_t k = 0; k < d.loss_diff.size(); ++k) s.x.push_back(double(k + 1));
    const bool any_positive = std::any_of(d.loss_diff.begin(), d.loss_diff.end(), [](double v) { return v > 0; });
    ChartAxes axes{"|Δloss| per step: " + s.name, "step", "|loss difference|"};
    axes.log_y = any_positive;
    axes.integer_x = true;
    body += "<h2>Drift: " + html_escape(s.name) + "</h2>\n";
    body += any_positive ? svg_line_chart(axes, {s})
                         : "<p>Bit-identical losses at every step (|Δloss| = 0).</p>" + svg_line_chart(axes, {s});
    std::vector<std::vector<std::string>> rows;
    for (const auto& [name, v] : d.weight_rel_l2) rows.push_back({name, sci(v)});
    body += html_table({"parameter", "final relative L2 difference"}, rows);
  }
  return html_page("nnlab compare: " + r.config.model, body);
}

}  // namespace nnlab
