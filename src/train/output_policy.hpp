// One policy for every file a command writes (train --metrics and --timeline, export --out,
// calibrate --out, simulate --timeline): an output never replaces an input of the run, never goes
// into a checkpoint, and never replaces a file that is not the command's own kind of output
// (recognised by its contents), unless --force is given. Replacing one's own earlier output of the
// same kind, or an empty file, is fine.
#pragma once

#include <string>
#include <vector>

namespace strata {

struct OutputKind {
  const char* what;                              // "a Strata metrics file", for the sentence
  bool (*recognizes)(const std::string& path);  // whether an existing file is one of these
};

// The kinds Strata writes, each recognised by what its writer puts first.
OutputKind metrics_output();          // JSON lines starting with {"type": "run", ...}
OutputKind trace_output();            // a Chrome trace with otherData.generator "strata ..."
OutputKind safetensors_output();      // safetensors whose __metadata__.source is "strata ..."
OutputKind calibrated_cluster_output();  // a cluster TOML written by strata calibrate

// Throws strata::Error with a sentence naming `flag`, the path and how to override; a path that
// exists and is not a regular file (a directory, a device, a FIFO) is refused even with force.
// `inputs` are files or directories the output must not be nor lie inside.
void require_output(const std::string& path, const std::string& flag, const OutputKind& kind,
                    const std::vector<std::string>& inputs, bool force);

}  // namespace strata
