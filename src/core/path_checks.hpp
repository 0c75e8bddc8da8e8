// Checks of a path's kind before it is opened, so that nothing of the user's is read as what it
// is not (a FIFO blocks forever, a directory reads as a stream error) or overwritten by an
// output: inputs must be regular files; an output must be a regular file or not exist yet (in a
// directory that does and can be written), and must not be one of the run's inputs.
#pragma once

#include <string>
#include <vector>

namespace strata {

// `what` names the flag ("--data"). Throws strata::Error with a sentence.
void require_input_file(const std::string& path, const std::string& what);
// inputs: paths the output must not be, nor be inside (files or directories).
void require_output_file(const std::string& path, const std::string& what, const std::vector<std::string>& inputs);

}  // namespace strata
