#include "apps/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "apps/report_html.h"
#include "core/error.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

std::string fixed_or_na(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string field(const nlohmann::json& run, const char* key) {
  const auto it = run.find(key);
  if (it == run.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string device_of(const RunLog& r) {
  return field(r.run, "device") + (r.run.value("simulated", false) ? kSimulatedMark : "");
}

// Every leaf of a record as "a.b.c" -> value, so two runs' settings line up row by row.
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) flatten(value, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
}

// The configuration (every option, after recipe defaults) or the environment (machine,
// libraries, versions) of a run, from its run record's "environment".
std::map<std::string, std::string> settings_of(const RunLog& r, bool configuration) {
  std::map<std::string, std::string> out;
  nlohmann::json env = r.run.value("environment", nlohmann::json::object());
  if (configuration) {
    flatten(env.value("config", nlohmann::json::object()), "", out);
  } else {
    env.erase("config");
    flatten(env, "", out);
  }
  return out;
}

// The run's time-weighted images/s over all its epochs: all images over all seconds.
double overall_images_per_second(const RunLog& r) {
  double images = 0, seconds = 0;
  for (const EpochRecord& e : r.epochs) images += e.images_per_second * e.seconds, seconds += e.seconds;
  return seconds > 0 ? images / seconds : NAN;
}

std::string percent(double fraction) { return std::isfinite(fraction) ? fixed_or_na(100 * fraction, 2) + "%" : "n/a"; }

// How a run ended: epochs and steps done, final and best accuracy, speed, time.
std::vector<std::string> result_row(const RunLog& r) {
  int64_t steps = 0, best_epoch = 0;
  double seconds = 0, best = -1;
  for (const EpochRecord& e : r.epochs) {
    steps += e.steps;
    seconds += e.seconds;
    if (e.test_accuracy > best) best = e.test_accuracy, best_epoch = e.epoch;
  }
  if (!r.steps.empty()) steps = std::max(steps, r.steps.back().step);  // steps of an unfinished epoch
  const EpochRecord* last = r.epochs.empty() ? nullptr : &r.epochs.back();
  return {r.name,
          std::to_string(r.epochs.size()) + " of " + field(r.run, "epochs"),
          std::to_string(steps),
          last ? fixed_or_na(last->train_loss, 4) : "n/a",
          last ? percent(last->test_accuracy) : "n/a",
          best >= 0 ? percent(best) + " (epoch " + std::to_string(best_epoch) + ")" : "n/a",
          fixed_or_na(overall_images_per_second(r), 0),
          r.epochs.empty() ? "n/a" : fixed_or_na(seconds, 2)};
}

std::string runs_tables(const std::vector<RunLog>& runs) {
  std::vector<std::vector<std::string>> what, results;
  for (const RunLog& r : runs) {
    what.push_back({r.name, field(r.run, "model"), field(r.run, "data"), device_of(r), field(r.run, "parameters"),
                    field(r.run, "optimizer"), field(r.run, "batch"), field(r.run, "seed"), field(r.run, "threads")});
    results.push_back(result_row(r));
  }
  return "<h2>Runs</h2>\n" +
         html_table({"run", "model", "data", "device", "parameters", "optimizer", "batch", "seed", "threads"}, what,
                    true) +
         html_table({"run", "epochs", "steps", "final train loss", "final test accuracy", "best test accuracy",
                     "images/s", "training s"},
                    results);
}

// One series per run of a per-epoch quantity.
std::vector<ChartSeries> per_epoch(const std::vector<RunLog>& runs, double (*value)(const EpochRecord&)) {
  std::vector<ChartSeries> out;
  for (const RunLog& r : runs) {
    ChartSeries s{r.name, {}, {}};
    for (const EpochRecord& e : r.epochs) s.x.push_back(double(e.epoch)), s.y.push_back(value(e));
    out.push_back(std::move(s));
  }
  return out;
}

// Per-epoch curves when some run finished an epoch; the per-step curve when some run
// recorded steps (a run that failed in its first epoch has only those).
std::string charts(const std::vector<RunLog>& runs) {
  const bool any_epochs = std::any_of(runs.begin(), runs.end(), [](const RunLog& r) { return !r.epochs.empty(); });
  const bool any_steps = std::any_of(runs.begin(), runs.end(), [](const RunLog& r) { return !r.steps.empty(); });
  ChartAxes loss{"training loss per epoch (mean over the epoch's steps)", "epoch", "loss"};
  ChartAxes accuracy{"test accuracy after each epoch", "epoch", "accuracy (%)"};
  ChartAxes speed{"training images/s per epoch", "epoch", "images/s"};
  loss.integer_x = accuracy.integer_x = speed.integer_x = true;
  std::string out = "<h2>Curves</h2>\n";
  if (!any_epochs) out += "<p>No epoch finished: only the recorded steps can be drawn.</p>\n";
  out += "<div class='charts'>\n";
  if (any_epochs) {
    out += svg_line_chart(loss, per_epoch(runs, [](const EpochRecord& e) { return e.train_loss; }));
    out += svg_line_chart(accuracy, per_epoch(runs, [](const EpochRecord& e) { return 100 * e.test_accuracy; }));
  }
  if (any_steps) {
    std::vector<ChartSeries> steps;
    for (const RunLog& r : runs) {
      ChartSeries s{r.name, {}, {}};
      for (const StepRecord& st : r.steps) s.x.push_back(double(st.step)), s.y.push_back(st.loss);
      steps.push_back(std::move(s));
    }
    ChartAxes axes{"training loss per recorded step (--metrics-every)", "step", "loss"};
    axes.integer_x = true;
    out += svg_line_chart(axes, steps);
  }
  if (any_epochs)
    out += svg_line_chart(speed, per_epoch(runs, [](const EpochRecord& e) { return e.images_per_second; }));
  return out + "</div>\n";
}

// One bar per epoch for a single run (where the time goes, and whether it changes); one bar
// per run, summed over its epochs, when runs are compared.
std::string phases_chart(const std::vector<RunLog>& runs) {
  std::vector<BarGroup> groups;
  for (const RunLog& r : runs) {
    if (runs.size() == 1) {
      for (const EpochRecord& e : r.epochs)
        groups.push_back({"epoch " + std::to_string(e.epoch), {e.data, e.forward, e.backward, e.optimizer}});
      continue;
    }
    BarGroup g{r.name, {0, 0, 0, 0}};
    for (const EpochRecord& e : r.epochs) {
      g.parts[0] += e.data, g.parts[1] += e.forward, g.parts[2] += e.backward, g.parts[3] += e.optimizer;
    }
    groups.push_back(std::move(g));
  }
  if (groups.empty()) return "";
  const std::string title = runs.size() == 1 ? "seconds per phase in each epoch" : "seconds per phase, all epochs";
  return "<h2>Time per phase</h2>\n<p>Data loading, forward pass, backward pass and optimizer step, as timed by the "
         "trainer (the evaluation after each epoch is not included).</p>\n" +
         svg_stacked_bars(title, "s", {"data", "forward", "backward", "optimizer"}, groups);
}

// One column per run. With several runs the settings that differ come first, all of them
// folded away below.
std::string settings_table(const std::vector<RunLog>& runs, bool configuration) {
  std::vector<std::map<std::string, std::string>> settings;
  std::map<std::string, bool> keys;  // key -> the runs disagree on it
  for (const RunLog& r : runs) settings.push_back(settings_of(r, configuration));
  for (const auto& s : settings)
    for (const auto& [key, value] : s) keys[key] = false;
  for (auto& [key, differs] : keys) {
    const auto first = settings[0].find(key);
    for (const auto& s : settings) {
      const auto it = s.find(key);
      differs = differs || it == s.end() || first == settings[0].end() || it->second != first->second;
    }
  }
  std::vector<std::string> header = {configuration ? "option" : "environment"};
  for (const RunLog& r : runs) header.push_back(r.name);
  std::vector<std::vector<std::string>> differing, all;
  for (const auto& [key, differs] : keys) {
    std::vector<std::string> row = {key};
    for (const auto& s : settings) row.push_back(s.count(key) ? s.at(key) : "");
    if (differs) differing.push_back(row);
    all.push_back(std::move(row));
  }
  if (runs.size() == 1) return html_table(header, all, true);
  const std::string what = configuration ? "options" : "entries";
  return (differing.empty() ? "<p>The runs share all " + what + ".</p>\n"
                            : "<p>The " + what + " that differ between the runs:</p>\n" +
                                  html_table(header, differing, true)) +
         "<details><summary>All " + std::to_string(all.size()) + " " + what + "</summary>\n" +
         html_table(header, all, true) + "</details>\n";
}

std::string settings_tables(const std::vector<RunLog>& runs) {
  const std::string tables =
      "<div><h2>Configuration</h2>\n<p>Every option of the run, after the model's recipe filled in those not "
      "given.</p>\n" + settings_table(runs, true) +
      "</div><div><h2>Environment</h2>\n<p>The machine, the libraries and the build the run trained with.</p>\n" +
      settings_table(runs, false) + "</div>";
  // One run's two tables are narrow: side by side. Several runs' are as wide as the page.
  return runs.size() == 1 ? "<div class='columns'>" + tables + "</div>\n" : tables + "\n";
}

}  // namespace

std::string run_report_html(const std::vector<RunLog>& runs) {
  std::string intro = "<p>";
  for (size_t i = 0; i < runs.size(); ++i)
    intro += (i ? ", " : "") + std::string("<b>") + html_escape(runs[i].name) + "</b> (" + html_escape(runs[i].path) + ")";
  intro += runs.size() == 1 ? ": one training run of nnlab.</p>\n"
                            : ": " + std::to_string(runs.size()) + " training runs of nnlab, overlaid.</p>\n";
  for (const RunLog& r : runs) {
    const auto bad = std::find_if(r.steps.begin(), r.steps.end(), [](const StepRecord& s) { return !std::isfinite(s.loss); });
    if (bad != r.steps.end())
      intro += "<p>" + html_escape(r.name) + ": the loss was NaN or infinite at step " + std::to_string(bad->step) +
               ", the first such recorded step; such losses are not drawn.</p>\n";
  }
  for (const RunLog& r : runs)
    if (r.dropped_partial_line)
      intro += "<p>" + html_escape(r.name) + ": the last record was cut off (the run stopped while writing it) and "
               "is left out.</p>\n";
  const std::string title = runs.size() == 1 ? "nnlab run: " + runs[0].name : "nnlab runs";
  return html_page(title, intro + runs_tables(runs) + charts(runs) + phases_chart(runs) + settings_tables(runs));
}

void write_run_report(const std::vector<std::string>& record_files, const std::string& output, const char* option) {
  NNLAB_CHECK(!record_files.empty(), "no run record files given; name at least one (from `nnlab train --metrics FILE`)");
  check_writable(output, option);
  std::vector<RunLog> runs;
  for (const std::string& path : record_files) {
    std::error_code ec;
    NNLAB_CHECK(!std::filesystem::equivalent(path, output, ec), option, " '", output, "' is the run record file ",
                path, "; writing the report there would destroy it, so choose another name");
    runs.push_back(read_run_log(path));
  }
  name_runs(runs);
  write_text_file(output, run_report_html(runs));
}

void write_train_report(const std::string& records, bool records_kept, const std::string& output) {
  std::vector<RunLog> runs = {read_run_log(records)};
  name_runs(runs);
  if (!records_kept) {
    runs[0].name = std::filesystem::path(output).stem().string();
    runs[0].path = "records not kept: add --metrics FILE to keep them";
  }
  write_text_file(output, run_report_html(runs));
}

}  // namespace nnlab
