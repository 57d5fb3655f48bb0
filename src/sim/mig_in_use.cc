#include "tessera/sim/mig_in_use.h"

#include <charconv>

#include "tessera/partition/mig_layout.h"
#include "tessera/sim/csv.h"

namespace tessera::sim {

StatusOr<std::vector<partition::MigGpuState>> ReadMigInUse(const MigGeometry& g, const std::string& path, int gpus) {
  std::vector<partition::MigGpuState> state(static_cast<size_t>(gpus));
  if (path.empty()) return state;
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsvFile(path));
  auto gc = t.ColumnIndex("gpu"), pc = t.ColumnIndex("profile"), sc = t.ColumnIndex("start"),
       uc = t.ColumnIndex("in_use");
  if (!gc || !pc || !sc || !uc) return InvalidArgumentError(path + ":1:1: expected columns gpu,profile,start,in_use");
  for (const CsvRow& row : t.rows) {
    auto int_field = [&](size_t col, int lo, int hi) -> StatusOr<int> {
      int v = 0;
      const std::string& f = row.fields[col];
      auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (f.empty() || ec != std::errc() || ptr != f.data() + f.size() || v < lo || v > hi) {
        return InvalidArgumentError(t.Where(row, col) + ": " + t.header[col] + ": expected an integer " +
                                    std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + f + "'");
      }
      return v;
    };
    TESSERA_ASSIGN_OR_RETURN(int gpu, int_field(*gc, 0, gpus - 1));
    TESSERA_ASSIGN_OR_RETURN(int start, int_field(*sc, 0, g.memory_slices - 1));
    TESSERA_ASSIGN_OR_RETURN(int used, int_field(*uc, 0, 1));
    auto p = partition::FindProfileIndex(g, row.fields[*pc]);
    if (!p.ok()) return InvalidArgumentError(t.Where(row, *pc) + ": profile: " + p.status().message());
    state[static_cast<size_t>(gpu)].current.push_back({*p, start});
    state[static_cast<size_t>(gpu)].in_use.push_back(used == 1);
  }
  for (size_t k = 0; k < state.size(); ++k) {
    if (Status s = partition::ValidateLayout(g, state[k].current); !s.ok()) {
      return InvalidArgumentError(path + ": GPU " + std::to_string(k) + ": " + s.message());
    }
  }
  return state;
}

}  // namespace tessera::sim
