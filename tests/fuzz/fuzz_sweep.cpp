// Fuzzes the sweep-file reader (pert sweep --merge / --out): input = a sweep file's text. A file
// it accepts must then order, print as a table and as CSV, and key every cell, with no
// exception other than pert::Error (a missing result key once read freed memory in the CSV).
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "pert/grid_file.hpp"
#include "pert/json_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_pert_errors("sweep", [&] {
    nlohmann::json sweep =
        pert::parse_sweep(pert::parse_json(fuzz::bytes(data, size), "fuzz/sweep.json"), "fuzz/sweep.json");
    pert::order_cells(sweep["cells"]);
    (void)pert::markdown_table(sweep["cells"]);
    (void)pert::csv_text(sweep);
    for (const nlohmann::json& c : sweep["cells"]) (void)pert::cell_key(c);
    (void)pert::comparable_settings(sweep["settings"]);
  });
  return 0;
}
