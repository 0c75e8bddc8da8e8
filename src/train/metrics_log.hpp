// JSON-lines metrics file: one object per line, flushed as written so a crash loses nothing.
#pragma once

#include <fstream>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace strata {

class MetricsLog {
 public:
  // An empty path disables logging; append keeps earlier lines (used when resuming).
  MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);
  bool enabled() const { return out_.is_open(); }

 private:
  std::ofstream out_;
  std::string path_;
};

}  // namespace strata
