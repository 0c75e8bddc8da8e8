// JSON-lines metrics writer.
#include "train/metrics_log.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace strata {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  STRATA_REQUIRE(out_.good(), "{}: cannot open the metrics file for writing", path);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  STRATA_REQUIRE(out_.good(), "{}: writing the metrics file failed (disk full?)", path_);
}

}  // namespace strata
