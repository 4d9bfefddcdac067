// The page `nnlab report` and `train --report` write: one or more training runs, read back
// from their run records (run_log.h), overlaid in the manner of TensorBoard's scalar view.
#pragma once
#include <string>
#include <vector>

#include "apps/run_log.h"

namespace nnlab {

// A self-contained HTML page (report_html.h): a summary table; loss and accuracy per epoch,
// loss per step where recorded, images/s per epoch; the time per phase; the configuration
// and environment of every run (with several runs, the settings that differ first).
std::string run_report_html(const std::vector<RunLog>& runs);

// Reads the run record files, draws their page and writes it to `output` (through a temporary
// file and a rename). Every failure, of any input or of the output, is one Error before
// anything is written; `option` names the output in messages (-o, --report).
void write_run_report(const std::vector<std::string>& record_files, const std::string& output, const char* option);

// train --report: the page of the run whose records are in `records` (kept: the user's
// --metrics file; not kept: a scratch file that is removed after, so the page names the run
// after the report and says the records were not kept).
void write_train_report(const std::string& records, bool records_kept, const std::string& output);

}  // namespace nnlab
